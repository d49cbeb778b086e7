// soak: 32 concurrent clients drive a real kvtierd with a mix of Lookup,
// Put, Get, Save and Load for a while, then check that
//  - no call failed (NOT_FOUND for a block evicted meanwhile is expected:
//    the host tier is small on purpose, so eviction runs all the time);
//  - every block served (Get) or loaded (Load) is byte-exact;
//  - the daemon's resident memory stayed bounded (sampled every second and
//    printed; the limit is the host tier plus a fixed overhead);
//  - at the end no lease or region is left once clients release and
//    unregister theirs.
// Prints p50/p99 latency per RPC.
//
//   soak --kvtierd PATH --dir DIR [--seconds 60] [--clients 32] [--seed 1]
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kvtier/client.h"
#include "kvtier/shared_region.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "testing/test_bytes.h"

namespace {

using kvtier::client::Client;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kBlock = 32 * 1024;
constexpr uint64_t kHostTier = 64ull << 20;
constexpr uint64_t kRssOverhead = 256ull << 20;  // daemon beyond its host tier
constexpr int kRegionBlocks = 8;

std::string Content(const std::string& key) {
  const std::vector<uint8_t> b = kvtier::DeterministicBytes("soak/" + key, kBlock);
  return std::string(b.begin(), b.end());
}

enum Op { kLookup, kPut, kGet, kSave, kLoad, kOps };
const char* const kOpNames[kOps] = {"Lookup", "Put", "Get", "Save", "Load"};

struct Stats {
  std::mutex mu;
  std::vector<double> micros[kOps];
  uint64_t errors = 0, wrong_bytes = 0, not_found = 0;
  std::vector<std::string> first_errors;
  void Error(std::string what) {
    std::lock_guard<std::mutex> l(mu);
    ++errors;
    if (first_errors.size() < 10) first_errors.push_back(std::move(what));
  }
};

uint64_t RssBytes(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      uint64_t kb = 0;
      std::string digits;
      for (char c : line) {
        if (c >= '0' && c <= '9') digits += c;
      }
      if (absl::SimpleAtoi(digits, &kb)) return kb * 1024;
    }
  }
  return 0;
}

void RunClient(int id, const std::string& address, const std::string& ns, uint64_t seed,
               std::atomic<bool>& stop, Stats& stats) {
  kvtier::client::ClientOptions o;
  o.timeout = absl::Seconds(30);
  auto c = Client::Connect(address, o);
  auto region = kvtier::client::SharedRegion::Create(2 * kRegionBlocks * kBlock);
  if (!c.ok() || !region.ok()) {
    stats.Error("client setup failed");
    return;
  }
  absl::StatusOr<std::string> region_id =
      (*c)->RegisterMemory((*region)->path(), (*region)->size());
  if (!region_id.ok()) {
    stats.Error(absl::StrCat("RegisterMemory: ", region_id.status().ToString()));
    return;
  }
  std::mt19937_64 rng(seed);
  int next_chain = 0;
  std::vector<std::string> leases;
  auto key = [&](int chain, int i) { return absl::StrCat("k", id, "c", chain, "b", i); };
  while (!stop.load()) {
    const Op op = static_cast<Op>(rng() % kOps);
    const int chain = next_chain > 0 ? static_cast<int>(rng() % next_chain) : 0;
    std::vector<std::string> keys;
    for (int i = 0; i < kRegionBlocks; ++i) keys.push_back(key(chain, i));
    absl::Status s;
    const auto t0 = Clock::now();
    switch (op) {
      case kLookup: {
        kvtier::client::LookupOptions lo;
        lo.take_lease = rng() % 2 == 0;
        absl::StatusOr<kvtier::client::LookupResult> r = (*c)->Lookup(ns, keys, lo);
        s = r.status();
        if (r.ok() && !r->lease_id.empty()) leases.push_back(r->lease_id);
        // As an engine would after loading: give the lease back soon.
        if (leases.size() > 2) {
          absl::StatusOr<uint32_t> released = (*c)->Release(leases.front());
          if (!released.ok() && released.status().code() != absl::StatusCode::kNotFound) {
            stats.Error(absl::StrCat("Release: ", released.status().ToString()));
          }
          leases.erase(leases.begin());
        }
        break;
      }
      case kPut: {
        const int fresh = next_chain++;
        std::vector<std::string> k, d;
        for (int i = 0; i < kRegionBlocks; ++i) {
          k.push_back(key(fresh, i));
          d.push_back(Content(k.back()));
        }
        s = (*c)->Put(ns, k, d);
        break;
      }
      case kGet: {
        absl::StatusOr<std::vector<std::string>> got = (*c)->Get(ns, {keys[0]});
        s = got.status();
        if (got.ok() && (got->size() != 1 || (*got)[0] != Content(keys[0]))) {
          std::lock_guard<std::mutex> l(stats.mu);
          ++stats.wrong_bytes;
        }
        break;
      }
      case kSave: {
        const int fresh = next_chain++;
        std::vector<kvtier::client::RegionBlockRef> refs;
        for (int i = 0; i < kRegionBlocks; ++i) {
          const std::string k = key(fresh, i), data = Content(k);
          std::memcpy((*region)->data() + i * kBlock, data.data(), kBlock);
          refs.push_back({k, i > 0 ? key(fresh, i - 1) : "", i * kBlock, kBlock, {}});
        }
        s = (*c)->Save(ns, *region_id, refs, [&](const kvtier::client::BlockCompletion& b) {
          if (!b.status.ok() && b.status.code() != absl::StatusCode::kResourceExhausted) {
            stats.Error(absl::StrCat("Save block: ", b.status.ToString()));
          }
        });
        break;
      }
      case kLoad: {
        std::vector<kvtier::client::RegionBlockRef> refs;
        const uint64_t base = kRegionBlocks * kBlock;
        for (int i = 0; i < kRegionBlocks; ++i)
          refs.push_back({keys[i], "", base + i * kBlock, kBlock, {}});
        s = (*c)->Load(ns, *region_id, refs, [&](const kvtier::client::BlockCompletion& b) {
          if (b.status.ok()) {
            const std::string want = Content(keys[b.index]);
            if (std::memcmp((*region)->data() + base + b.index * kBlock, want.data(), kBlock) !=
                0) {
              std::lock_guard<std::mutex> l(stats.mu);
              ++stats.wrong_bytes;
            }
          } else if (b.status.code() == absl::StatusCode::kNotFound) {
            std::lock_guard<std::mutex> l(stats.mu);
            ++stats.not_found;
          } else {
            stats.Error(absl::StrCat("Load block: ", b.status.ToString()));
          }
        });
        break;
      }
      case kOps:
        break;
    }
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (s.code() == absl::StatusCode::kNotFound) {
      std::lock_guard<std::mutex> l(stats.mu);
      ++stats.not_found;  // evicted (or never put: chain 0 before any Put)
    } else if (!s.ok()) {
      stats.Error(absl::StrCat(kOpNames[op], ": ", s.ToString()));
    }
    std::lock_guard<std::mutex> l(stats.mu);
    stats.micros[op].push_back(us);
  }
  for (const std::string& lease : leases) {
    absl::StatusOr<uint32_t> r = (*c)->Release(lease);
    // An expired lease is NOT_FOUND: nothing to release.
    if (!r.ok() && r.status().code() != absl::StatusCode::kNotFound) {
      stats.Error(absl::StrCat("Release: ", r.status().ToString()));
    }
  }
  if (absl::Status s = (*c)->UnregisterMemory(*region_id); !s.ok()) {
    stats.Error(absl::StrCat("UnregisterMemory: ", s.ToString()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string kvtierd, dir;
  int seconds = 60, clients = 32;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i], v = argv[i + 1];
    if (f == "--kvtierd") kvtierd = v;
    if (f == "--dir") dir = v;
    if (f == "--seconds") seconds = std::atoi(v.c_str());
    if (f == "--clients") clients = std::atoi(v.c_str());
    if (f == "--seed") seed = std::strtoull(v.c_str(), nullptr, 10);
  }
  if (kvtierd.empty() || dir.empty() || seconds <= 0 || clients <= 0) {
    std::fprintf(stderr, "usage: soak --kvtierd PATH --dir DIR [--seconds N] [--clients N]\n");
    return 2;
  }
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string config = dir + "/kvtierd.yaml", sock = dir + "/kvtier.sock";
  {
    std::ofstream f(config);
    f << "metrics:\n  listen: \"off\"\n"
      << "server:\n  listen: unix:" << sock << "\n"
      << "host_tier:\n  bytes: " << kHostTier << "\n  slab_bytes: 4MiB\n"
      << "limits:\n  max_block_bytes: 1MiB\n"
      << "nvme:\n  dirs: " << dir << "/data\n  bytes_per_dir: 128MiB\n  slab_bytes: 8MiB\n"
      << "leases:\n  default_ttl_ms: 2000\n"
      << "costmodel:\n  probe_tiers: false\n"
      << "gpu:\n  tier: off\n"
      << "log:\n  level: warn\n";
  }
  signal(SIGPIPE, SIG_IGN);
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDOUT_FILENO);
    execl(kvtierd.c_str(), kvtierd.c_str(), "--config", config.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait for the socket.
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, sock.c_str(), sizeof(addr.sun_path) - 1);
  bool up = false;
  for (int i = 0; i < 3000 && !up; ++i) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    up = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int rc = 0;
  const std::string address = "unix:" + sock;
  auto admin =
      kvtier::v1::Admin::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto c = Client::Connect(address);
  kvtier::client::NamespaceOptions o;
  o.model_id = "soak";
  o.layout = {1, 1, 128, "bf16", 64, 0, 1};
  absl::StatusOr<kvtier::client::OpenedNamespace> ns =
      up && c.ok() ? (*c)->OpenNamespace(o) : absl::UnavailableError("kvtierd did not start");
  if (!ns.ok()) {
    std::fprintf(stderr, "FAIL: %s\n", ns.status().ToString().c_str());
    kill(pid, SIGKILL);
    return 1;
  }
  Stats stats;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back(RunClient, i, address, ns->id, seed * 1000 + i, std::ref(stop),
                         std::ref(stats));
  }
  std::vector<uint64_t> rss;
  for (int s = 0; s < seconds; ++s) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    rss.push_back(RssBytes(pid));
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  kvtier::v1::GetStatusResponse st;
  {
    grpc::ClientContext ctx;
    admin->GetStatus(&ctx, kvtier::v1::GetStatusRequest(), &st);
  }
  kill(pid, SIGTERM);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);

  std::printf("soak: %d clients for %d s\n", clients, seconds);
  std::printf("  %-7s %9s %10s %10s\n", "rpc", "calls", "p50 us", "p99 us");
  for (int op = 0; op < kOps; ++op) {
    std::vector<double>& v = stats.micros[op];
    std::sort(v.begin(), v.end());
    const auto pct = [&](double p) {
      return v.empty() ? 0.0 : v[static_cast<size_t>(p * (v.size() - 1))];
    };
    std::printf("  %-7s %9zu %10.0f %10.0f\n", kOpNames[op], v.size(), pct(0.5), pct(0.99));
  }
  std::printf("  daemon RSS MiB per second:");
  for (uint64_t r : rss) std::printf(" %llu", static_cast<unsigned long long>(r >> 20));
  std::printf(
      "\n  not found (evicted): %llu, errors: %llu, wrong bytes: %llu, leases left: %u, "
      "regions left: %u, evictions: %llu\n",
      static_cast<unsigned long long>(stats.not_found),
      static_cast<unsigned long long>(stats.errors),
      static_cast<unsigned long long>(stats.wrong_bytes), st.active_leases(),
      st.registered_regions(), static_cast<unsigned long long>(st.counters().evictions()));
  for (const std::string& e : stats.first_errors) std::fprintf(stderr, "FAIL: %s\n", e.c_str());
  const uint64_t max_rss = rss.empty() ? 0 : *std::max_element(rss.begin(), rss.end());
  if (stats.errors != 0 || stats.wrong_bytes != 0) rc = 1;
  if (st.active_leases() != 0 || st.registered_regions() != 0) {
    std::fprintf(stderr, "FAIL: leases or regions left at the end\n");
    rc = 1;
  }
  if (max_rss > kHostTier + kRssOverhead) {
    std::fprintf(stderr, "FAIL: daemon RSS reached %llu MiB (bound %llu)\n",
                 static_cast<unsigned long long>(max_rss >> 20),
                 static_cast<unsigned long long>((kHostTier + kRssOverhead) >> 20));
    rc = 1;
  }
  for (int op = 0; op < kOps; ++op) {
    if (stats.micros[op].empty()) {
      std::fprintf(stderr, "FAIL: no %s calls\n", kOpNames[op]);
      rc = 1;
    }
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    std::fprintf(stderr, "FAIL: kvtierd did not stop cleanly (status %d)\n", wstatus);
    rc = 1;
  }
  std::filesystem::remove_all(dir);
  return rc;
}
