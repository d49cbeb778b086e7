// A clumsy (or hostile) client against a shared daemon: it truncates the
// shared-memory file it registered, before and during Save and Load, and it
// deletes a very long chain. The daemon must survive the first (SIGBUS would
// kill it for every tenant) and keep answering other callers during the
// second (issue 16, items 1 and 2).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/sigbus_guard.h"
#include "kvtier/client.h"
#include "server/config.h"
#include "server/daemon.h"
#include "testing/test_bytes.h"
#include "testing/test_daemon_config.h"

// ThreadSanitizer's memcpy interceptor takes the SIGBUS of a truncated
// region inside its runtime instead of handing it to the SIGBUS guard
// (measured: the test process dies of SIGBUS), so the truncation tests run in
// the Release and ASan builds only.
#if defined(__SANITIZE_THREAD__)
#define KVTIER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVTIER_TSAN 1
#endif
#endif
#ifdef KVTIER_TSAN
#define KVTIER_SKIP_UNDER_TSAN() \
  GTEST_SKIP() << "ThreadSanitizer takes a SIGBUS inside its memcpy interceptor"
#else
#define KVTIER_SKIP_UNDER_TSAN() (void)0
#endif

namespace kvtier {
namespace {

using client::Client;

// 2 * 1 layer * 1 head * 64 dim * 16 tokens * 2 bytes = 4 KiB blocks.
client::NamespaceOptions Spec(const std::string& model = "clumsy-model") {
  client::NamespaceOptions o;
  o.model_id = model;
  o.layout = {1, 1, 64, "bf16", 16, 0, 1};
  return o;
}

class ClumsyClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shm_dir_ = absl::StrCat("/dev/shm/kvtier-clumsy-", getpid());
    std::filesystem::create_directories(shm_dir_);
  }
  void TearDown() override {
    client_.reset();
    daemon_.reset();
    std::filesystem::remove_all(shm_dir_);
  }
  void Start(uint64_t host_bytes) {
    DaemonConfig c = TestDaemonConfig(host_bytes, 16ull << 20, 1ull << 20);
    c.gpu_tier = "off";
    c.peer_transport = "off";
    c.shm_dir = shm_dir_;
    absl::StatusOr<std::unique_ptr<Daemon>> d = Daemon::Start(c);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    client::ClientOptions o;
    o.timeout = absl::Seconds(60);
    absl::StatusOr<std::unique_ptr<Client>> cl = Client::Connect(daemon_->listen_address(), o);
    ASSERT_TRUE(cl.ok()) << cl.status();
    client_ = *std::move(cl);
  }
  // A shared-memory file of `size` bytes, mapped here; returns its fd.
  int MakeRegion(const std::string& name, size_t size, uint8_t** map) {
    const std::string path = absl::StrCat(shm_dir_, "/", name);
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    EXPECT_NE(p, MAP_FAILED);
    *map = static_cast<uint8_t*>(p);
    return fd;
  }

  std::string shm_dir_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<Client> client_;
};

// Item 1: the region's file is truncated to 0 after registration. Save and
// Load must fail those blocks (FAILED_PRECONDITION, naming the cause), store
// and serve nothing wrong, and the daemon must go on serving.
TEST_F(ClumsyClientTest, TruncatedRegionFailsTheCallNotTheDaemon) {
  KVTIER_SKIP_UNDER_TSAN();
  Start(64ull << 20);
  absl::StatusOr<client::OpenedNamespace> ns = client_->OpenNamespace(Spec());
  ASSERT_TRUE(ns.ok()) << ns.status();
  constexpr size_t kBlocks = 8, kBlock = 4096;
  uint8_t* map = nullptr;
  const int fd = MakeRegion("r", kBlocks * kBlock, &map);
  const std::vector<uint8_t> bytes = DeterministicBytes("truncated", kBlocks * kBlock);
  std::copy(bytes.begin(), bytes.end(), map);
  absl::StatusOr<std::string> region =
      client_->RegisterMemory(absl::StrCat(shm_dir_, "/r"), kBlocks * kBlock, 0);
  ASSERT_TRUE(region.ok()) << region.status();
  std::vector<client::RegionBlockRef> refs;
  for (size_t i = 0; i < kBlocks; ++i) {
    refs.push_back(
        {absl::StrCat("k", i), i == 0 ? "" : absl::StrCat("k", i - 1), i * kBlock, kBlock, {}});
  }
  // Half of them saved while the file is whole.
  std::vector<client::BlockCompletion> saved;
  ASSERT_TRUE(client_
                  ->Save(ns->id, *region, absl::MakeConstSpan(refs).first(4),
                         [&](const client::BlockCompletion& c) { saved.push_back(c); })
                  .ok());
  for (const auto& c : saved) ASSERT_TRUE(c.status.ok()) << c.status;

  const uint64_t faults_before = GuardedSigbusCount();
  ASSERT_EQ(ftruncate(fd, 0), 0);
  std::vector<client::BlockCompletion> out;
  const absl::Status save =
      client_->Save(ns->id, *region, absl::MakeConstSpan(refs).subspan(4),
                    [&](const client::BlockCompletion& c) { out.push_back(c); });
  ASSERT_TRUE(save.ok()) << save;
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].status.code(), absl::StatusCode::kFailedPrecondition) << out[0].status;
  EXPECT_NE(out[0].status.message().find("truncated"), std::string::npos) << out[0].status;
  for (const auto& c : out) EXPECT_FALSE(c.status.ok());
  // Nothing of the failed Save was stored.
  EXPECT_EQ(client_->Lookup(ns->id, {"k0", "k1", "k2", "k3", "k4"})->matched, 4u);

  out.clear();
  const absl::Status load =
      client_->Load(ns->id, *region, absl::MakeConstSpan(refs).first(4),
                    [&](const client::BlockCompletion& c) { out.push_back(c); });
  ASSERT_TRUE(load.ok()) << load;
  ASSERT_EQ(out.size(), 4u);
  for (const auto& c : out) {
    EXPECT_EQ(c.status.code(), absl::StatusCode::kFailedPrecondition) << c.status;
  }
  EXPECT_GT(GuardedSigbusCount(), faults_before);

  // The daemon is alive, and the cached blocks are intact and served.
  absl::StatusOr<std::vector<std::string>> got = client_->Get(ns->id, {"k0", "k1", "k2", "k3"});
  ASSERT_TRUE(got.ok()) << got.status();
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*got)[i], std::string(bytes.begin() + i * kBlock, bytes.begin() + (i + 1) * kBlock));
  }
  // A region made whole again serves again.
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(kBlocks * kBlock)), 0);
  out.clear();
  ASSERT_TRUE(client_
                  ->Load(ns->id, *region, absl::MakeConstSpan(refs).first(4),
                         [&](const client::BlockCompletion& c) { out.push_back(c); })
                  .ok());
  for (const auto& c : out) EXPECT_TRUE(c.status.ok()) << c.status;
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.begin() + 4 * kBlock, map));
  munmap(map, kBlocks * kBlock);
  close(fd);
}

// Item 1, racing: the file is truncated while a 1,024-block Load copies
// into it (round 0: before it starts, so the cut surely hits; later rounds
// race with the copy, wherever it is). Every block gets an outcome, a block
// that cannot be loaded is FAILED_PRECONDITION, and the daemon survives.
TEST_F(ClumsyClientTest, TruncationDuringALongLoad) {
  KVTIER_SKIP_UNDER_TSAN();
  Start(256ull << 20);
  absl::StatusOr<client::OpenedNamespace> ns = client_->OpenNamespace(Spec());
  ASSERT_TRUE(ns.ok());
  constexpr size_t kBlocks = 1024, kBlock = 4096;
  std::vector<std::string> keys, data;
  for (size_t i = 0; i < kBlocks; ++i) {
    keys.push_back(absl::StrCat("c", i));
    const std::vector<uint8_t> b = DeterministicBytes(keys.back(), kBlock);
    data.emplace_back(b.begin(), b.end());
  }
  ASSERT_TRUE(client_->Put(ns->id, keys, data).ok());
  for (int round = 0; round < 5; ++round) {
    uint8_t* map = nullptr;
    const std::string name = absl::StrCat("load", round);
    const int fd = MakeRegion(name, kBlocks * kBlock, &map);
    absl::StatusOr<std::string> region =
        client_->RegisterMemory(absl::StrCat(shm_dir_, "/", name), kBlocks * kBlock, 0);
    ASSERT_TRUE(region.ok()) << region.status();
    std::vector<client::RegionBlockRef> refs;
    for (size_t i = 0; i < kBlocks; ++i) refs.push_back({keys[i], "", i * kBlock, kBlock, {}});
    std::atomic<size_t> seen{0};
    if (round == 0) {
      ASSERT_EQ(ftruncate(fd, 0), 0);
    }
    std::thread cutter([&] {
      if (round == 0) return;
      // Cut once part of the Load has been reported (a different point each
      // round; the copy may be done by then, and then nothing fails).
      const absl::Time deadline = absl::Now() + absl::Seconds(5);
      while (seen.load() < 50 * static_cast<size_t>(round) && absl::Now() < deadline) {
        std::this_thread::yield();
      }
      ASSERT_EQ(ftruncate(fd, 0), 0);
    });
    std::vector<absl::Status> outcomes(kBlocks, absl::UnknownError("no completion"));
    const absl::Status load =
        client_->Load(ns->id, *region, refs, [&](const client::BlockCompletion& c) {
          outcomes[c.index] = c.status;
          seen.fetch_add(1);
        });
    cutter.join();
    ASSERT_TRUE(load.ok()) << load;
    size_t ok = 0;
    for (size_t i = 0; i < kBlocks; ++i) {
      ASSERT_NE(outcomes[i].code(), absl::StatusCode::kUnknown) << "block " << i;
      if (outcomes[i].ok()) {
        ++ok;
      } else {
        EXPECT_EQ(outcomes[i].code(), absl::StatusCode::kFailedPrecondition) << outcomes[i];
      }
    }
    if (round == 0) {
      EXPECT_EQ(ok, 0u) << "the file was empty before the Load";
    }
    std::printf("round %d: %zu of %zu blocks loaded before the cut\n", round, ok, kBlocks);
    ASSERT_TRUE(client_->UnregisterMemory(*region).ok());
    munmap(map, kBlocks * kBlock);
    close(fd);
  }
  // Still serving, byte-exact.
  EXPECT_EQ(*client_->Get(ns->id, {keys[0], keys[1]}),
            (std::vector<std::string>{data[0], data[1]}));
}

// Item 2: deleting a 120,000-block chain took 44.6 s under the cache lock
// (a walk to the root per block); a Lookup in another namespace waited all
// along. Now the delete is linear and lets other calls in: the concurrent
// Lookups each answer within 50 ms, or within half the delete's own time on a
// loaded machine or under a sanitizer: the lock is not held throughout.
TEST_F(ClumsyClientTest, LongChainDeleteDoesNotStallOthers) {
  constexpr int kChain = 120'000;
  Start(640ull << 20);
  absl::StatusOr<client::OpenedNamespace> chain_ns = client_->OpenNamespace(Spec("chain"));
  absl::StatusOr<client::OpenedNamespace> other_ns = client_->OpenNamespace(Spec("other"));
  ASSERT_TRUE(chain_ns.ok() && other_ns.ok());
  std::vector<std::string> keys, data;
  for (int i = 0; i < kChain; ++i) {
    keys.push_back(absl::StrCat("chain-", i));
    data.emplace_back(64, static_cast<char>('a' + i % 26));
  }
  for (int at = 0; at < kChain; at += 40'000) {
    ASSERT_TRUE(client_
                    ->Put(chain_ns->id, absl::MakeConstSpan(keys).subspan(at, 40'000),
                          absl::MakeConstSpan(data).subspan(at, 40'000),
                          at == 0 ? "" : keys[at - 1])
                    .ok());
  }
  ASSERT_TRUE(client_->Put(other_ns->id, {"x"}, {std::string(64, 'x')}).ok());

  std::atomic<bool> done{false};
  std::atomic<int64_t> worst_us{0};
  std::atomic<int> lookups{0};
  std::thread prober([&] {
    client::ClientOptions o;
    o.timeout = absl::Seconds(60);
    std::unique_ptr<Client> c = *Client::Connect(daemon_->listen_address(), o);
    ASSERT_TRUE(c->Lookup(other_ns->id, {"x"}).ok());  // connected and warm
    while (!done.load()) {
      const absl::Time start = absl::Now();
      absl::StatusOr<client::LookupResult> r = c->Lookup(other_ns->id, {"x"});
      const int64_t us = absl::ToInt64Microseconds(absl::Now() - start);
      ASSERT_TRUE(r.ok() && r->matched == 1u);
      int64_t prev = worst_us.load();
      while (us > prev && !worst_us.compare_exchange_weak(prev, us)) {
      }
      lookups.fetch_add(1);
    }
  });
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time start = absl::Now();
  absl::StatusOr<uint32_t> deleted = client_->Delete(chain_ns->id, {keys[0]}, /*recursive=*/true);
  const absl::Duration took = absl::Now() - start;
  done = true;
  prober.join();
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, static_cast<uint32_t>(kChain));
  std::printf("deleted %d blocks in %s; %d concurrent Lookups, the slowest %lld us\n", kChain,
              absl::FormatDuration(took).c_str(), lookups.load(),
              static_cast<long long>(worst_us.load()));
  EXPECT_GT(lookups.load(), 0);
  // 50 ms, or half the delete's own time when a loaded machine or a
  // sanitizer slows it (CI saw a 220 ms delete and a 55 ms Lookup, and under
  // TSan a 427 ms delete and a 110 ms Lookup): a lock held throughout would
  // make a Lookup wait about the whole delete.
  EXPECT_LT(worst_us.load(), std::max<int64_t>(50'000, absl::ToInt64Microseconds(took) / 2))
      << "a Lookup waited behind the delete";
  EXPECT_EQ(client_->Lookup(chain_ns->id, {keys[0]})->matched, 0u);
  EXPECT_EQ(daemon_->cache().Snapshot(true).stranded_blocks, 0u);
}

}  // namespace
}  // namespace kvtier
