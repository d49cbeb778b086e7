// crash_oracle: kills a real kvtierd with SIGKILL at random moments under a
// randomized workload, restarts it, and checks it against an oracle.
//
// Block contents are a deterministic function of the key, so any byte the
// daemon serves can be checked. Each cycle:
//  1. start kvtierd (NVMe tier on, write-through) and re-open the namespace;
//  2. verify: every block the daemon had reported persisted (Lookup's
//     `persisted`) before the last kill and that was not deleted since is
//     served byte-exact, or - only if the daemon dropped blocks for a reason
//     it reports (NVMe eviction, a torn slot found at recovery) - missing;
//     every other block served is byte-exact; the catalog and the slot files
//     agree (recovery dropped no record under kill -9, which cannot tear a
//     synced write);
//  3. run workers that Put chains of blocks, Lookup them (collecting which
//     are persisted), Get and check random blocks and Delete old chains;
//  4. SIGKILL the daemon after a random delay, mid-workload.
// A wrong byte, a persisted block lost without cause, or an RPC error other
// than the daemon going away fails the run. The seed makes a run replayable.
//
//   crash_oracle --kvtierd PATH --dir DIR [--cycles 50] [--seed N]
//                [--max-ms 600]
//
// Exit status 0 when every cycle passed; the summary goes to stdout.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

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
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kvtier/client.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "testing/test_bytes.h"

namespace {

using kvtier::client::Client;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kBlockBytes = 32 * 1024;  // 1 layer x 1 head x 128 x bf16 x 64 tokens x 2
constexpr int kChainBlocks = 24;
constexpr uint64_t kLiveBytesCap = 16ull << 20;  // delete old chains beyond this

std::string Content(const std::string& key) {
  const std::vector<uint8_t> b = kvtier::DeterministicBytes("crash/" + key, kBlockBytes);
  return std::string(b.begin(), b.end());
}

std::string Key(int chain, int i) { return absl::StrCat("c", chain, "/b", i); }

// What the oracle knows. Guarded by mu.
struct Oracle {
  std::mutex mu;
  std::map<int, int> chains;        // chain -> blocks put (acknowledged)
  std::set<int> busy;               // chains a worker is extending
  std::set<std::string> persisted;  // acknowledged persisted, not deleted since
  uint64_t live_bytes = 0;
};

struct Failures {
  std::mutex mu;
  std::vector<std::string> what;
  void Add(std::string s) {
    std::lock_guard<std::mutex> l(mu);
    if (what.size() < 20) std::fprintf(stderr, "FAIL: %s\n", s.c_str());
    what.push_back(std::move(s));
  }
  size_t size() {
    std::lock_guard<std::mutex> l(mu);
    return what.size();
  }
};

// While a restarted daemon comes up.
bool NotUpYet(const absl::Status& s) { return s.code() == absl::StatusCode::kUnavailable; }

class Daemon {
 public:
  Daemon(std::string binary, std::string dir) : binary_(std::move(binary)), dir_(std::move(dir)) {
    config_ = dir_ + "/kvtierd.yaml";
    std::ofstream f(config_);
    f << "metrics:\n  listen: \"off\"\n"
      << "server:\n  listen: unix:" << dir_ << "/kvtier.sock\n"
      << "host_tier:\n  bytes: 64MiB\n  slab_bytes: 4MiB\n"
      << "limits:\n  max_block_bytes: 1MiB\n"
      << "nvme:\n  dirs: " << dir_ << "/data\n  bytes_per_dir: 256MiB\n  slab_bytes: 8MiB\n"
      << "  write_policy: write_through\n  mover_interval_ms: 5\n"
      << "costmodel:\n  probe_tiers: false\n"
      << "gpu:\n  tier: off\n"
      << "log:\n  level: warn\n";
  }
  std::string address() const { return "unix:" + dir_ + "/kvtier.sock"; }

  // Waits until the socket accepts connections, so the client's first call
  // does not fail and put its channel into reconnect backoff.
  bool WaitListening() const {
    const std::string path = dir_ + "/kvtier.sock";
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const bool up = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      close(fd);
      if (up) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  bool Start() {
    pid_ = fork();
    if (pid_ == 0) {
      const int null = open("/dev/null", O_WRONLY);
      if (null >= 0) dup2(null, STDOUT_FILENO);
      execl(binary_.c_str(), binary_.c_str(), "--config", config_.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid_ > 0;
  }
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  ~Daemon() { Kill(); }

 private:
  const std::string binary_, dir_;
  std::string config_;
  pid_t pid_ = -1;
};

// Opens the namespace, retrying until the restarted daemon answers.
std::string OpenNamespace(Client& c, Failures& fail) {
  kvtier::client::NamespaceOptions o;
  o.model_id = "crash-oracle";
  o.layout = {1, 1, 128, "bf16", 64, 0, 1};
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    absl::StatusOr<kvtier::client::OpenedNamespace> ns = c.OpenNamespace(o);
    if (ns.ok()) return ns->id;
    if (!NotUpYet(ns.status())) {
      fail.Add(absl::StrCat("OpenNamespace: ", ns.status().ToString()));
      return "";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fail.Add("the daemon did not come up within 30 s");
  return "";
}

kvtier::v1::GetStatusResponse Status(const std::string& address) {
  auto admin =
      kvtier::v1::Admin::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  kvtier::v1::GetStatusResponse r;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  admin->GetStatus(&ctx, kvtier::v1::GetStatusRequest(), &r);
  return r;
}

// Step 2: after a restart, before any new traffic.
void Verify(Client& c, const std::string& ns, Oracle& oracle, Failures& fail, uint64_t* missing,
            uint64_t* checked, const std::string& address) {
  const kvtier::v1::GetStatusResponse st = Status(address);
  if (st.counters().recovery_dropped() != 0) {
    fail.Add(absl::StrCat("recovery dropped ", st.counters().recovery_dropped(),
                          " catalog records after kill -9 (slots and catalog disagree)"));
  }
  std::vector<std::string> keys;
  {
    std::lock_guard<std::mutex> l(oracle.mu);
    keys.assign(oracle.persisted.begin(), oracle.persisted.end());
  }
  for (size_t at = 0; at < keys.size(); at += 32) {
    // One Get for 32 blocks; block by block only when some are missing.
    const size_t end = std::min(keys.size(), at + 32);
    absl::StatusOr<std::vector<std::string>> all =
        c.Get(ns, absl::MakeConstSpan(keys.data() + at, end - at));
    if (all.ok() && all->size() == end - at) {
      for (size_t i = at; i < end; ++i) {
        ++*checked;
        if ((*all)[i - at] != Content(keys[i])) {
          fail.Add(absl::StrCat("persisted block ", keys[i], " served with wrong bytes"));
        }
      }
      continue;
    }
    for (size_t i = at; i < end; ++i) {
      absl::StatusOr<std::vector<std::string>> got = c.Get(ns, {keys[i]});
      ++*checked;
      if (got.ok()) {
        if (got->size() != 1 || (*got)[0] != Content(keys[i])) {
          fail.Add(absl::StrCat("persisted block ", keys[i], " served with wrong bytes"));
        }
      } else if (got.status().code() == absl::StatusCode::kNotFound) {
        ++*missing;
        std::lock_guard<std::mutex> l(oracle.mu);
        oracle.persisted.erase(keys[i]);
      } else {
        fail.Add(absl::StrCat("Get of persisted ", keys[i], ": ", got.status().ToString()));
      }
    }
  }
  // Blocks put but not yet persisted may be gone: each chain continues from
  // what the restarted daemon holds.
  std::map<int, int> chains;
  {
    std::lock_guard<std::mutex> l(oracle.mu);
    chains = oracle.chains;
  }
  for (const auto& [chain, n] : chains) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; ++i) keys.push_back(Key(chain, i));
    absl::StatusOr<kvtier::client::LookupResult> r = c.Lookup(ns, keys);
    if (!r.ok()) {
      fail.Add(absl::StrCat("Lookup after restart: ", r.status().ToString()));
      return;
    }
    std::lock_guard<std::mutex> l(oracle.mu);
    oracle.live_bytes -= std::min<uint64_t>(oracle.live_bytes, (n - r->matched) * kBlockBytes);
    if (r->matched == 0) {
      oracle.chains.erase(chain);
    } else {
      oracle.chains[chain] = static_cast<int>(r->matched);
    }
  }
  if (*missing > 0 && st.counters().recovery_dropped() == 0) {
    // Persisted blocks may go only for a reason the daemon reports; the
    // workload keeps NVMe far below its watermarks, so there is none.
    fail.Add(absl::StrCat(*missing, " persisted blocks lost across kill -9 without cause"));
  }
}

// Step 3: one worker, until the daemon is about to be killed.
// `killing` is set just before the daemon is killed: errors after it are
// expected (the daemon went away mid-call); errors before it are failures,
// except RESOURCE_EXHAUSTED (the host tier full of blocks not yet written
// through), which is counted.
void Work(Client& c, const std::string& ns, Oracle& oracle, Failures& fail,
          std::atomic<bool>& killing, std::atomic<int>& next_chain, uint64_t seed,
          std::atomic<uint64_t>& ops, std::atomic<uint64_t>& exhausted) {
  std::mt19937_64 rng(seed);
  while (!killing.load()) {
    uint64_t dice = rng() % 100;
    {
      // Past the cap, delete: NVMe stays far below its watermarks, so no
      // persisted block is ever evicted and every loss is a bug.
      std::lock_guard<std::mutex> l(oracle.mu);
      if (oracle.live_bytes > kLiveBytesCap) dice = 99;
    }
    absl::Status s;
    if (dice < 45) {
      // Put the next 1-8 blocks of a new or growing chain.
      int chain = -1, have = 0;
      {
        std::lock_guard<std::mutex> l(oracle.mu);
        for (auto& [id, n] : oracle.chains) {
          if (n < kChainBlocks && oracle.busy.count(id) == 0 && rng() % 3 == 0) {
            chain = id;
            have = n;
            break;
          }
        }
        if (chain < 0) chain = next_chain.fetch_add(1);
        oracle.busy.insert(chain);
      }
      const int n = std::min<int>(1 + rng() % 8, kChainBlocks - have);
      std::vector<std::string> keys, data;
      for (int i = have; i < have + n; ++i) {
        keys.push_back(Key(chain, i));
        data.push_back(Content(keys.back()));
      }
      s = c.Put(ns, keys, data, have > 0 ? Key(chain, have - 1) : "");
      std::lock_guard<std::mutex> l(oracle.mu);
      oracle.busy.erase(chain);
      if (s.ok()) {
        oracle.chains[chain] = std::max(oracle.chains[chain], have + n);
        oracle.live_bytes += n * kBlockBytes;
      }
    } else if (dice < 75) {
      // Lookup a chain: learn which of its blocks are persisted.
      int chain = -1, n = 0;
      {
        std::lock_guard<std::mutex> l(oracle.mu);
        if (!oracle.chains.empty()) {
          auto it = oracle.chains.begin();
          std::advance(it, rng() % oracle.chains.size());
          chain = it->first;
          n = it->second;
        }
      }
      if (chain < 0) continue;
      std::vector<std::string> keys;
      for (int i = 0; i < n; ++i) keys.push_back(Key(chain, i));
      absl::StatusOr<kvtier::client::LookupResult> r = c.Lookup(ns, keys);
      if (r.ok()) {
        std::lock_guard<std::mutex> l(oracle.mu);
        if (oracle.chains.count(chain) != 0) {  // not deleted meanwhile
          for (size_t i = 0; i < r->persisted.size(); ++i) {
            if (r->persisted[i]) oracle.persisted.insert(keys[i]);
          }
        }
      }
      s = r.status();
    } else if (dice < 95) {
      // Get a random known block: whatever is served must be exact.
      std::string key;
      {
        std::lock_guard<std::mutex> l(oracle.mu);
        if (!oracle.chains.empty()) {
          auto it = oracle.chains.begin();
          std::advance(it, rng() % oracle.chains.size());
          key = Key(it->first, static_cast<int>(rng() % it->second));
        }
      }
      if (key.empty()) continue;
      absl::StatusOr<std::vector<std::string>> got = c.Get(ns, {key});
      if (got.ok() && (got->size() != 1 || (*got)[0] != Content(key))) {
        fail.Add(absl::StrCat("block ", key, " served with wrong bytes"));
      }
      s = got.ok() || got.status().code() == absl::StatusCode::kNotFound ? absl::OkStatus()
                                                                         : got.status();
    } else {
      // Delete the oldest chain once live data passes the cap. It leaves the
      // oracle first: from then on it may or may not exist.
      int chain = -1, n = 0;
      {
        std::lock_guard<std::mutex> l(oracle.mu);
        auto oldest = oracle.chains.begin();
        while (oldest != oracle.chains.end() && oracle.busy.count(oldest->first) != 0) ++oldest;
        if (oracle.live_bytes > kLiveBytesCap && oldest != oracle.chains.end()) {
          chain = oldest->first;
          n = oldest->second;
          oracle.chains.erase(oldest);
          oracle.live_bytes -= std::min<uint64_t>(oracle.live_bytes, n * kBlockBytes);
          for (int i = 0; i < n; ++i) oracle.persisted.erase(Key(chain, i));
        }
      }
      if (chain < 0) continue;
      // A block being read is not deleted (FAILED_PRECONDITION, "retry").
      absl::StatusOr<uint32_t> d;
      for (int attempt = 0; attempt < 50; ++attempt) {
        d = c.Delete(ns, {Key(chain, 0)}, /*recursive=*/true);
        if (d.ok() || d.status().code() != absl::StatusCode::kFailedPrecondition) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      s = d.ok() || d.status().code() == absl::StatusCode::kNotFound ? absl::OkStatus()
                                                                     : d.status();
    }
    ++ops;
    if (s.ok()) continue;
    if (killing.load()) return;  // killed under us
    if (s.code() == absl::StatusCode::kResourceExhausted) {
      ++exhausted;
      continue;
    }
    fail.Add(absl::StrCat("RPC failed: ", s.ToString()));
    return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string kvtierd, dir;
  int cycles = 50, max_ms = 600;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i], v = argv[i + 1];
    if (f == "--kvtierd") kvtierd = v;
    if (f == "--dir") dir = v;
    if (f == "--cycles") cycles = std::atoi(v.c_str());
    if (f == "--seed") seed = std::strtoull(v.c_str(), nullptr, 10);
    if (f == "--max-ms") max_ms = std::atoi(v.c_str());
  }
  if (kvtierd.empty() || dir.empty() || cycles <= 0 || max_ms < 50) {
    std::fprintf(stderr,
                 "usage: crash_oracle --kvtierd PATH --dir DIR [--cycles N>0] [--seed N]"
                 " [--max-ms >=50]\n");
    return 2;
  }
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  signal(SIGPIPE, SIG_IGN);
  Daemon daemon(kvtierd, dir);
  Oracle oracle;
  Failures fail;
  std::mt19937_64 rng(seed);
  std::atomic<int> next_chain{0};
  uint64_t missing = 0, checked = 0, max_persisted = 0;
  std::atomic<uint64_t> ops{0}, exhausted{0};
  double start_s = 0, verify_s = 0, stop_s = 0;
  const auto t0 = Clock::now();
  for (int cycle = 0; cycle < cycles && fail.size() == 0; ++cycle) {
    if (!daemon.Start() || !daemon.WaitListening()) {
      fail.Add("the daemon did not start listening within 30 s");
      break;
    }
    kvtier::client::ClientOptions copts;
    copts.timeout = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon.address(), copts);
    if (!client.ok()) {
      fail.Add(client.status().ToString());
      break;
    }
    const auto t_start = Clock::now();
    const std::string ns = OpenNamespace(**client, fail);
    if (ns.empty()) break;
    const auto t_up = Clock::now();
    Verify(**client, ns, oracle, fail, &missing, &checked, daemon.address());
    start_s += std::chrono::duration<double>(t_up - t_start).count();
    verify_s += std::chrono::duration<double>(Clock::now() - t_up).count();
    {
      std::lock_guard<std::mutex> l(oracle.mu);
      max_persisted = std::max<uint64_t>(max_persisted, oracle.persisted.size());
    }
    std::atomic<bool> killing{false};
    std::vector<std::thread> workers;
    for (int w = 0; w < 3; ++w) {
      workers.emplace_back(Work, std::ref(**client), ns, std::ref(oracle), std::ref(fail),
                           std::ref(killing), std::ref(next_chain), rng(), std::ref(ops),
                           std::ref(exhausted));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % (max_ms - 49)));
    killing = true;
    const auto t_kill = Clock::now();
    daemon.Kill();  // mid-workload: RPCs in flight fail
    for (std::thread& t : workers) t.join();
    stop_s += std::chrono::duration<double>(Clock::now() - t_kill).count();
  }
  // A last restart: everything persisted before the final kill is checked.
  if (fail.size() == 0 && daemon.Start() && daemon.WaitListening()) {
    auto client = Client::Connect(daemon.address());
    if (client.ok()) {
      const std::string ns = OpenNamespace(**client, fail);
      if (!ns.empty()) Verify(**client, ns, oracle, fail, &missing, &checked, daemon.address());
    }
    daemon.Kill();
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf(
      "crash_oracle: %d kill cycles in %.1f s (seed %llu): %llu ops, %llu persisted-block checks "
      "(up to %llu persisted at once), %llu missing, %llu puts refused for room, %zu failures\n",
      cycles, secs, static_cast<unsigned long long>(seed),
      static_cast<unsigned long long>(ops.load()), static_cast<unsigned long long>(checked),
      static_cast<unsigned long long>(max_persisted), static_cast<unsigned long long>(missing),
      static_cast<unsigned long long>(exhausted.load()), fail.size());
  std::printf("  time: %.1f s waiting for restarts, %.1f s verifying, %.1f s for workers to stop\n",
              start_s, verify_s, stop_s);
  std::filesystem::remove_all(dir);
  return fail.size() == 0 ? 0 : 1;
}
