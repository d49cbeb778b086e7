// The by-reference data path over real gRPC: an engine registers a
// shared-memory file, saves blocks from it, looks them up under a lease and
// loads them back into it, with one completion per block. Failure cases give
// precise statuses and never a false "loaded": missing blocks, a region
// unregistered before the load, a file others may read, ranges outside the
// region; a lease taken by Lookup keeps its blocks loadable under eviction
// pressure (invariant 4).
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"
#include "testing/test_bytes.h"
#include "testing/test_daemon_config.h"

namespace kvtier {
namespace {

constexpr uint64_t kBlock = 64 * 1024;
constexpr uint64_t kRegion = 64 * kBlock;

class SharedMemoryRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DaemonConfig c = TestDaemonConfig(8ull << 20, 1ull << 20, 1ull << 20);  // 128 blocks of 64 KiB
    auto d = Daemon::Start(c);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    auto channel =
        grpc::CreateChannel(daemon_->listen_address(), grpc::InsecureChannelCredentials());
    kv_ = v1::KvCache::NewStub(channel);
    admin_ = v1::Admin::NewStub(channel);
    // 1 layer, 1 KV head of dim 128, bf16, 128 tokens: 64 KiB blocks.
    v1::OpenNamespaceRequest open;
    open.set_model_id("shm-model");
    auto* l = open.mutable_layout();
    l->set_num_layers(1);
    l->set_num_kv_heads(1);
    l->set_head_dim(128);
    l->set_dtype(v1::DTYPE_BF16);
    l->set_tokens_per_block(128);
    l->set_tp_size(1);
    grpc::ClientContext ctx;
    v1::OpenNamespaceResponse resp;
    ASSERT_TRUE(kv_->OpenNamespace(&ctx, open, &resp).ok());
    ns_ = resp.namespace_id();
    path_ = MakeFile(0600);
    fd_ = open_rw(path_);
    void* p = mmap(nullptr, kRegion, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    ASSERT_NE(p, MAP_FAILED);
    mem_ = static_cast<uint8_t*>(p);
  }
  void TearDown() override {
    munmap(mem_, kRegion);
    close(fd_);
    unlink(path_.c_str());
  }

  static int open_rw(const std::string& path) { return ::open(path.c_str(), O_RDWR); }

  static std::string MakeFile(mode_t mode) {
    char tmpl[] = "/dev/shm/kvtier-test-XXXXXX";
    const int fd = mkstemp(tmpl);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, kRegion), 0);
    close(fd);
    EXPECT_EQ(chmod(tmpl, mode), 0);
    return tmpl;
  }

  grpc::Status Register(const std::string& path, uint64_t size, std::string* id,
                        uint32_t owner_pid = 0) {
    v1::RegisterMemoryRequest req;
    req.set_owner_pid(owner_pid);
    req.mutable_region()->mutable_shared_memory()->set_path(path);
    req.mutable_region()->mutable_shared_memory()->set_size_bytes(size);
    v1::RegisterMemoryResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = kv_->RegisterMemory(&ctx, req, &resp);
    if (s.ok()) *id = resp.region_id();
    return s;
  }

  // Fills the region with block i's bytes at slot i.
  void Fill(int first, int n) {
    for (int i = first; i < first + n; ++i) {
      const std::vector<uint8_t> b = DeterministicBytes(absl::StrCat("b", i), kBlock);
      std::copy(b.begin(), b.end(), mem_ + (i - first) * kBlock);
    }
  }

  // Save (save=true) or Load of blocks first..first+n-1 at region slots
  // slot0.., collecting completions.
  template <typename Request>
  grpc::Status Transfer(bool save, const std::string& region, int first, int n, int slot0,
                        std::vector<v1::BlockCompletion>* out, uint64_t room = kBlock) {
    Request req;
    req.set_namespace_id(ns_);
    req.set_region_id(region);
    for (int i = first; i < first + n; ++i) {
      v1::BlockRef* r = req.add_blocks();
      r->set_key(absl::StrCat("b", i));
      if (save && i > 0) r->set_parent_key(absl::StrCat("b", i - 1));
      r->set_offset((slot0 + i - first) * kBlock);
      r->set_size_bytes(room);
    }
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::BlockCompletion>> reader;
    if constexpr (std::is_same_v<Request, v1::SaveRequest>) {
      reader = kv_->Save(&ctx, req);
    } else {
      reader = kv_->Load(&ctx, req);
    }
    v1::BlockCompletion c;
    while (reader->Read(&c)) out->push_back(c);
    return reader->Finish();
  }
  grpc::Status Save(const std::string& region, int first, int n,
                    std::vector<v1::BlockCompletion>* out) {
    return Transfer<v1::SaveRequest>(true, region, first, n, 0, out);
  }
  grpc::Status Load(const std::string& region, int first, int n, int slot0,
                    std::vector<v1::BlockCompletion>* out, uint64_t room = kBlock) {
    return Transfer<v1::LoadRequest>(false, region, first, n, slot0, out, room);
  }

  // Registers the file, saves b0..b7 and looks them up under a lease of
  // ttl_ms (0: the default).
  void SaveAndLease(uint32_t ttl_ms, std::string* region, v1::LookupResponse* lookup) {
    ASSERT_TRUE(Register(path_, kRegion, region).ok());
    Fill(0, 8);
    std::vector<v1::BlockCompletion> out;
    ASSERT_TRUE(Save(*region, 0, 8, &out).ok());
    v1::LookupRequest lr;
    lr.set_namespace_id(ns_);
    for (int i = 0; i < 8; ++i) lr.add_keys(absl::StrCat("b", i));
    lr.set_take_lease(true);
    lr.set_lease_ttl_ms(ttl_ms);
    grpc::ClientContext ctx;
    ASSERT_TRUE(kv_->Lookup(&ctx, lr, lookup).ok());
  }

  // Saves six 40-block chains b<base>.. through region slots 0..39: the
  // 128-block host tier fills about twice over, evicting unpinned blocks.
  void SaveOtherChains(const std::string& region, int base) {
    for (int round = 0; round < 6; ++round) {
      const int first = base + round * 40;
      Fill(first, 40);
      v1::SaveRequest req;
      req.set_namespace_id(ns_);
      req.set_region_id(region);
      for (int i = 0; i < 40; ++i) {
        v1::BlockRef* r = req.add_blocks();
        r->set_key(absl::StrCat("b", first + i));
        if (i > 0) r->set_parent_key(absl::StrCat("b", first + i - 1));
        r->set_offset(i * kBlock);
        r->set_size_bytes(kBlock);
      }
      grpc::ClientContext ctx;
      auto reader = kv_->Save(&ctx, req);
      v1::BlockCompletion c;
      while (reader->Read(&c)) EXPECT_EQ(c.code(), 0) << c.message();
      ASSERT_TRUE(reader->Finish().ok());
    }
  }

  uint64_t Evictions() {
    grpc::ClientContext ctx;
    v1::GetStatusResponse s;
    EXPECT_TRUE(admin_->GetStatus(&ctx, v1::GetStatusRequest(), &s).ok());
    return s.counters().evictions();
  }

  bool SlotHolds(int slot, int block) {
    const std::vector<uint8_t> b = DeterministicBytes(absl::StrCat("b", block), kBlock);
    return std::equal(b.begin(), b.end(), mem_ + slot * kBlock);
  }

  uint64_t Blocks() {
    grpc::ClientContext ctx;
    v1::GetStatusResponse s;
    EXPECT_TRUE(admin_->GetStatus(&ctx, v1::GetStatusRequest(), &s).ok());
    return s.blocks();
  }

  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<v1::KvCache::Stub> kv_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::string ns_, path_;
  int fd_ = -1;
  uint8_t* mem_ = nullptr;
};

TEST_F(SharedMemoryRpcTest, SaveLookupLoadThroughSharedMemory) {
  std::string region;
  ASSERT_TRUE(Register(path_, kRegion, &region).ok());
  Fill(0, 8);
  std::vector<v1::BlockCompletion> saved;
  ASSERT_TRUE(Save(region, 0, 8, &saved).ok());
  ASSERT_EQ(saved.size(), 8u);
  for (uint32_t i = 0; i < 8; ++i) {
    EXPECT_EQ(saved[i].index(), i);
    EXPECT_EQ(saved[i].code(), 0) << saved[i].message();
    EXPECT_EQ(saved[i].size_bytes(), kBlock);
  }
  v1::LookupRequest lr;
  lr.set_namespace_id(ns_);
  for (int i = 0; i < 8; ++i) lr.add_keys(absl::StrCat("b", i));
  v1::LookupResponse lookup;
  grpc::ClientContext ctx;
  ASSERT_TRUE(kv_->Lookup(&ctx, lr, &lookup).ok());
  EXPECT_EQ(lookup.matched(), 8u);
  // Load into slots 16..23 and check every byte.
  std::memset(mem_ + 16 * kBlock, 0, 8 * kBlock);
  std::vector<v1::BlockCompletion> loaded;
  ASSERT_TRUE(Load(region, 0, 8, 16, &loaded).ok());
  ASSERT_EQ(loaded.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(loaded[i].code(), 0) << loaded[i].message();
    EXPECT_EQ(loaded[i].key(), absl::StrCat("b", i));
    EXPECT_TRUE(SlotHolds(16 + i, i)) << "slot " << 16 + i;
  }
}

TEST_F(SharedMemoryRpcTest, LoadNamesEveryBlockItCouldNotDeliver) {
  std::string region;
  ASSERT_TRUE(Register(path_, kRegion, &region).ok());
  Fill(0, 3);
  std::vector<v1::BlockCompletion> out;
  ASSERT_TRUE(Save(region, 0, 3, &out).ok());
  std::memset(mem_ + 10 * kBlock, 0xee, 5 * kBlock);
  out.clear();
  ASSERT_TRUE(Load(region, 0, 5, 10, &out).ok());  // b3 and b4 were never saved
  ASSERT_EQ(out.size(), 5u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i].code(), 0);
  for (int i = 3; i < 5; ++i) {
    EXPECT_EQ(out[i].code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(out[i].size_bytes(), 0u);
    EXPECT_EQ(mem_[(10 + i) * kBlock], 0xee);  // untouched
  }
  out.clear();  // a room too small for the block: OUT_OF_RANGE, not truncated
  ASSERT_TRUE(Load(region, 0, 1, 20, &out, kBlock / 2).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].code(), grpc::StatusCode::OUT_OF_RANGE);
}

TEST_F(SharedMemoryRpcTest, LeaseKeepsLookupsLoadableUnderPressure) {
  std::string region;
  v1::LookupResponse lookup;
  SaveAndLease(0, &region, &lookup);
  ASSERT_EQ(lookup.matched(), 8u);
  std::vector<v1::BlockCompletion> out;
  // Fill the 128-block host tier several times over with other chains.
  SaveOtherChains(region, 1000);
  EXPECT_GT(Evictions(), 100u);  // there was pressure
  out.clear();
  ASSERT_TRUE(Load(region, 0, 8, 48, &out).ok());
  ASSERT_EQ(out.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(out[i].code(), 0) << "leased block " << i << ": " << out[i].message();
    EXPECT_TRUE(SlotHolds(48 + i, i));
  }
}

// After its lease expired, a looked-up block may be evicted; the Load then
// says so per block and leaves the region untouched, never a false OK.
TEST_F(SharedMemoryRpcTest, ExpiredLeaseGivesPreciseMisses) {
  std::string region;
  v1::LookupResponse lookup;
  SaveAndLease(50, &region, &lookup);
  std::vector<v1::BlockCompletion> out;
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  {
    v1::ReleaseRequest rel;
    rel.set_lease_id(lookup.lease_id());
    v1::ReleaseResponse resp;
    grpc::ClientContext ctx;
    EXPECT_EQ(kv_->Release(&ctx, rel, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  // Other chains fill the 128-block host tier about eight times over: b0..b7,
  // used more than once, outlive a few turnovers (the value policy), then
  // are evicted.
  for (int base : {2000, 3000, 4000, 5000}) SaveOtherChains(region, base);
  std::memset(mem_ + 48 * kBlock, 0xab, 8 * kBlock);
  out.clear();
  ASSERT_TRUE(Load(region, 0, 8, 48, &out).ok());
  ASSERT_EQ(out.size(), 8u);
  int missing = 0;
  for (int i = 0; i < 8; ++i) {
    if (out[i].code() == 0) {
      EXPECT_TRUE(SlotHolds(48 + i, i));  // a survivor is delivered intact
    } else {
      ++missing;
      EXPECT_EQ(out[i].code(), grpc::StatusCode::NOT_FOUND);
      EXPECT_EQ(mem_[(48 + i) * kBlock], 0xab);
    }
  }
  EXPECT_GT(missing, 0);  // the lease no longer protected them
}

TEST_F(SharedMemoryRpcTest, BadRegionsAndRequests) {
  std::string region;
  // Readable by others: refused, nothing registered.
  const std::string open_file = MakeFile(0644);
  EXPECT_EQ(Register(open_file, kRegion, &region).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  unlink(open_file.c_str());
  EXPECT_EQ(Register("/dev/shm/kvtier-no-such-file", kRegion, &region).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Register(path_, kRegion + 1, &region).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  {
    v1::RegisterMemoryRequest empty;
    v1::RegisterMemoryResponse resp;
    grpc::ClientContext ctx;
    EXPECT_EQ(kv_->RegisterMemory(&ctx, empty, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  ASSERT_TRUE(Register(path_, kRegion, &region).ok());
  Fill(0, 2);
  std::vector<v1::BlockCompletion> out;
  // A range past the end: INVALID_ARGUMENT before any block is stored.
  {
    v1::SaveRequest req;
    req.set_namespace_id(ns_);
    req.set_region_id(region);
    v1::BlockRef* r = req.add_blocks();
    r->set_key("x");
    r->set_offset(kRegion - 10);
    r->set_size_bytes(kBlock);
    grpc::ClientContext ctx;
    auto reader = kv_->Save(&ctx, req);
    v1::BlockCompletion c;
    EXPECT_FALSE(reader->Read(&c));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  EXPECT_EQ(Blocks(), 0u);
  EXPECT_EQ(Save("r0000000000000000", 0, 1, &out).error_code(), grpc::StatusCode::NOT_FOUND);
  // Unregistered: later Saves and Loads fail with NOT_FOUND, no completion.
  {
    v1::UnregisterMemoryRequest req;
    req.set_region_id(region);
    v1::UnregisterMemoryResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(kv_->UnregisterMemory(&ctx, req, &resp).ok());
    grpc::ClientContext ctx2;
    EXPECT_EQ(kv_->UnregisterMemory(&ctx2, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  out.clear();
  EXPECT_EQ(Save(region, 0, 2, &out).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Load(region, 0, 2, 4, &out).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(Blocks(), 0u);
}

// An engine that dies without unregistering leaks nothing: the daemon drops
// the region once the owner process has exited, and Saves into it are
// NOT_FOUND from then on.
TEST_F(SharedMemoryRpcTest, RegionOfADeadEngineIsDropped) {
  const pid_t engine = fork();
  ASSERT_GE(engine, 0);
  if (engine == 0) {
    pause();
    _exit(0);
  }
  std::string region;
  ASSERT_TRUE(Register(path_, kRegion, &region, static_cast<uint32_t>(engine)).ok());
  Fill(0, 2);
  std::vector<v1::BlockCompletion> out;
  ASSERT_TRUE(Save(region, 0, 2, &out).ok());
  ASSERT_EQ(kill(engine, SIGKILL), 0);
  ASSERT_EQ(waitpid(engine, nullptr, 0), engine);
  grpc::Status s;
  for (int i = 0; i < 50; ++i) {  // the daemon looks every second
    out.clear();
    s = Save(region, 0, 1, &out);
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  // A pid that is not running cannot own a region.
  std::string other;
  EXPECT_EQ(Register(path_, kRegion, &other, static_cast<uint32_t>(engine)).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Nor can a running process that does not map the file (e.g. a pid from
  // another pid namespace naming an unrelated process): pid 1 here.
  grpc::Status unrelated = Register(path_, kRegion, &other, 1);
  EXPECT_EQ(unrelated.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(unrelated.error_message().find("does not map"), std::string::npos)
      << unrelated.error_message();
}

}  // namespace
}  // namespace kvtier
