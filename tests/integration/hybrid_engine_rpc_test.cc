// Simulated engines of two hybrid model shapes against a real kvtierd, end
// to end over gRPC through a shared-memory region: a gpt-oss-shaped model
// (full attention alternating with a 128-token sliding window) and a
// Mamba-hybrid (full attention plus recurrent layers with state snapshots).
// Each engine saves what vLLM would hold after a prefill (every full-attention
// block, the window's last blocks, snapshots at its checkpoints), looks the
// prompt up, loads every group's blocks back byte-exact, waits until they are
// persisted on NVMe, and after kill -9 and a restart gets the same cut and the
// same bytes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kvtier/client.h"
#include "kvtier/shared_region.h"
#include "nlohmann/json.hpp"
#include "testing/test_bytes.h"

#ifndef KVTIERD_BINARY
#error "KVTIERD_BINARY must name the kvtierd executable"
#endif
#ifndef KVTIER_BINARY
#error "KVTIER_BINARY must name the kvtier CLI executable"
#endif

namespace kvtier {
namespace {

using client::Client;
using client::RegionBlockRef;

// A kvtierd child process with the NVMe tier on (write-through), on a unix
// socket in its own directory.
class KvtierdProcess {
 public:
  explicit KvtierdProcess(std::string dir) : dir_(std::move(dir)) {
    char tmpl[] = "/dev/shm/kvtier-hybrid-XXXXXX";  // regions live on tmpfs
    shm_dir_ = mkdtemp(tmpl);
    std::ofstream f(dir_ + "/kvtierd.yaml");
    f << "metrics:\n  listen: \"off\"\n"
      << "server:\n  listen: unix:" << dir_ << "/kvtier.sock\n  shm_dir: " << shm_dir_ << "\n"
      << "host_tier:\n  bytes: 64MiB\n  slab_bytes: 4MiB\n"
      << "limits:\n  max_block_bytes: 1MiB\n"
      << "nvme:\n  dirs: " << dir_ << "/data\n  bytes_per_dir: 128MiB\n  slab_bytes: 8MiB\n"
      << "  write_policy: write_through\n  mover_interval_ms: 5\n"
      << "costmodel:\n  probe_tiers: false\n"
      << "gpu:\n  tier: off\n"
      << "log:\n  level: warn\n";
  }
  ~KvtierdProcess() {
    Kill();
    std::filesystem::remove_all(shm_dir_);
  }

  std::string address() const { return "unix:" + dir_ + "/kvtier.sock"; }
  const std::string& shm_dir() const { return shm_dir_; }

  absl::StatusOr<std::unique_ptr<Client>> Start() {
    std::filesystem::remove(dir_ + "/kvtier.sock");
    pid_ = fork();
    if (pid_ == 0) {
      const int null = open("/dev/null", O_WRONLY);  // its configuration dump
      if (null >= 0) dup2(null, STDOUT_FILENO);
      const std::string config = dir_ + "/kvtierd.yaml";
      execl(KVTIERD_BINARY, KVTIERD_BINARY, "--config", config.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    if (pid_ < 0) return absl::InternalError("fork failed");
    // Until the socket exists (the daemon recovers its catalog first), so
    // the client's channel does not start in reconnect backoff.
    for (int i = 0; i < 3000 && !std::filesystem::exists(dir_ + "/kvtier.sock"); ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return absl::InternalError("kvtierd exited at start (its stderr says why)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(address());
    if (!c.ok()) return c.status();
    for (int i = 0; i < 3000; ++i) {
      // Any answer but UNAVAILABLE: the daemon serves.
      if ((*c)->Release("none").status().code() != absl::StatusCode::kUnavailable) return c;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return absl::DeadlineExceededError("kvtierd did not come up in 30 s");
  }
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  const std::string dir_;
  std::string shm_dir_;
  pid_t pid_ = -1;
};

// An engine's model shape: its groups, in layout.groups order.
struct Shape {
  std::string model;
  uint32_t layers = 0;
  std::vector<client::LayerGroupSpec> groups;
};

constexpr uint32_t kTokens = 16, kHeads = 1, kDim = 64;

// 2 (K, V) x layers x heads x dim x tokens x bf16.
uint64_t AttentionBytes(size_t layers) { return 2 * layers * kHeads * kDim * kTokens * 2; }

uint64_t GroupBytes(const client::LayerGroupSpec& g) {
  return g.kind == "recurrent" ? g.state_bytes : AttentionBytes(g.layers.size());
}

void PrintTo(const Shape& s, std::ostream* os) { *os << s.model; }

// gpt-oss: sliding (128 tokens) and full layers alternate.
Shape GptOss() {
  return {"gpt-oss-sim",
          4,
          {{"sliding_window", {0, 2}, 128, 0, 0}, {"full_attention", {1, 3}, 0, 0, 0}}};
}
// A Mamba hybrid: 2 attention layers among 6, 4 recurrent layers with a
// 48 KiB snapshot every 64 tokens.
Shape MambaHybrid() {
  return {"mamba-hybrid-sim",
          6,
          {{"full_attention", {2, 5}, 0, 0, 0}, {"recurrent", {0, 1, 3, 4}, 0, 48 << 10, 64}}};
}

std::string Bytes(uint32_t group, const std::string& key, uint64_t n) {
  return DeterministicString(absl::StrCat(group, "/", key), n);
}

class HybridEngineRpcTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvtier-hybrid-XXXXXX";
    dir_ = mkdtemp(tmpl);
    daemon_ = std::make_unique<KvtierdProcess>(dir_);
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(dir_);
  }

  // The kvtier CLI's stdout for `args` against the daemon.
  std::string RunCli(const std::string& args) {
    const std::string cmd =
        absl::StrCat(KVTIER_BINARY, " --addr ", daemon_->address(), " ", args);  // stdout
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
      EXPECT_EQ(pclose(p), 0) << cmd << ": " << out;
    } else {
      ADD_FAILURE() << "popen " << cmd;
    }
    return out;
  }

  // Starts (or restarts) the daemon, opens the namespace, maps a region.
  void Connect() {
    auto c = daemon_->Start();
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    client::NamespaceOptions o;
    o.model_id = GetParam().model;
    o.layout = {GetParam().layers, kHeads, kDim, "bf16", kTokens, 0, 1, GetParam().groups};
    auto ns = client_->OpenNamespace(o);
    ASSERT_TRUE(ns.ok()) << ns.status();
    ns_ = ns->id;
    ASSERT_EQ(ns->group_block_bytes.size(), GetParam().groups.size());
    for (size_t g = 0; g < GetParam().groups.size(); ++g) {
      ASSERT_EQ(ns->group_block_bytes[g], GroupBytes(GetParam().groups[g]));
    }
    region_.reset();
    auto r = client::SharedRegion::Create(8 << 20, daemon_->shm_dir());
    ASSERT_TRUE(r.ok()) << r.status();
    region_ = std::move(*r);
    auto id = client_->RegisterMemory(region_->path(), region_->size());
    ASSERT_TRUE(id.ok()) << id.status();
    region_id_ = *id;
  }

  // What the engine holds after prefilling `n` blocks, as one Save: every
  // full-attention block, the blocks of each window (vLLM frees those
  // behind it), a snapshot at each checkpoint and after the last block.
  std::vector<RegionBlockRef> EngineBlocks(const std::vector<std::string>& keys) {
    std::vector<RegionBlockRef> refs;
    uint64_t at = 0;
    const size_t n = keys.size();
    for (uint32_t g = 0; g < GetParam().groups.size(); ++g) {
      const client::LayerGroupSpec& spec = GetParam().groups[g];
      const uint64_t bytes = GroupBytes(spec);
      for (size_t i = 0; i < n; ++i) {
        bool held = spec.kind == "full_attention";
        if (spec.kind == "sliding_window") held = i + spec.window_tokens / kTokens >= n;
        if (spec.kind == "recurrent") {
          held = ((i + 1) * kTokens) % spec.checkpoint_tokens == 0 || i + 1 == n;
        }
        if (!held) continue;
        RegionBlockRef r;
        r.key = keys[i];
        r.parent_key = i == 0 ? "" : keys[i - 1];
        r.offset = at;
        r.size_bytes = bytes;
        r.group = g;
        at += bytes;
        refs.push_back(r);
      }
    }
    return refs;
  }

  void FillRegion(const std::vector<RegionBlockRef>& refs) {
    for (const RegionBlockRef& r : refs) {
      const std::string b = Bytes(r.group, r.key, r.size_bytes);
      std::memcpy(region_->data() + r.offset, b.data(), b.size());
    }
  }

  // Lookup, then Load every group's blocks into the region's upper half
  // and compare them with what was saved. Returns the cut.
  uint32_t LookupAndLoad(const std::vector<std::string>& keys, bool* all_persisted) {
    auto lr = client_->Lookup(ns_, keys, {.take_lease = true});
    EXPECT_TRUE(lr.ok()) << lr.status();
    if (!lr.ok()) return 0;
    EXPECT_EQ(lr->groups.size(), GetParam().groups.size());
    std::vector<RegionBlockRef> loads;
    uint64_t at = region_->size() / 2;
    *all_persisted = true;
    for (const client::GroupLoad& g : lr->groups) {
      for (size_t i = 0; i < g.sizes.size(); ++i) {
        RegionBlockRef r;
        r.key = keys[g.first_key + i];
        r.offset = at;
        r.size_bytes = g.sizes[i];
        r.group = g.group;
        at += g.sizes[i];
        loads.push_back(r);
        *all_persisted = *all_persisted && g.persisted[i];
      }
    }
    if (!loads.empty()) {
      std::vector<client::BlockCompletion> done;
      EXPECT_TRUE(client_
                      ->Load(ns_, region_id_, loads,
                             [&](const client::BlockCompletion& c) { done.push_back(c); })
                      .ok());
      EXPECT_EQ(done.size(), loads.size());
      for (const client::BlockCompletion& c : done) {
        EXPECT_TRUE(c.status.ok()) << c.key << ": " << c.status;
        const RegionBlockRef& r = loads[c.index];
        EXPECT_EQ(
            std::string(reinterpret_cast<const char*>(region_->data() + r.offset), r.size_bytes),
            Bytes(r.group, r.key, r.size_bytes))
            << "group " << r.group << " key " << r.key;
      }
    }
    if (!lr->lease_id.empty()) {
      EXPECT_TRUE(client_->Release(lr->lease_id).ok());
    }
    return lr->matched;
  }

  std::string dir_;
  std::unique_ptr<KvtierdProcess> daemon_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<client::SharedRegion> region_;
  std::string region_id_;
  std::string ns_;
};

std::vector<std::string> Keys(const std::string& tag, size_t n) {
  std::vector<std::string> k;
  for (size_t i = 0; i < n; ++i) k.push_back(absl::StrCat(tag, "-", i));
  return k;
}

TEST_P(HybridEngineRpcTest, SaveLookupLoadThenKill9AndRestart) {
  Connect();
  if (HasFatalFailure()) return;
  // A 40-block prompt (640 tokens), prefilled and saved.
  const std::vector<std::string> prompt = Keys("conv", 40);
  const std::vector<RegionBlockRef> saved = EngineBlocks(prompt);
  FillRegion(saved);
  std::vector<client::BlockCompletion> done;
  ASSERT_TRUE(client_
                  ->Save(ns_, region_id_, saved,
                         [&](const client::BlockCompletion& c) { done.push_back(c); })
                  .ok());
  ASSERT_EQ(done.size(), saved.size());
  for (const client::BlockCompletion& c : done) ASSERT_TRUE(c.status.ok()) << c.status;
  // The whole prompt is restorable: cut 40, each group's blocks byte-exact.
  bool persisted = false;
  EXPECT_EQ(LookupAndLoad(prompt, &persisted), 40u);
  // A follow-up turn shares the first 40 blocks: it resumes at 40.
  std::vector<std::string> next = prompt;
  for (const std::string& k : Keys("turn2", 8)) next.push_back(k);
  EXPECT_EQ(LookupAndLoad(next, &persisted), 40u);
  // A prompt that leaves the conversation at block 30 resumes only where
  // every group can restore: for gpt-oss, nowhere (the window's blocks
  // before 32 are gone); for the Mamba hybrid, at the checkpoint at 28.
  std::vector<std::string> branch(prompt.begin(), prompt.begin() + 30);
  branch.push_back("elsewhere");
  const uint32_t expect_branch = GetParam().model == "gpt-oss-sim" ? 0 : 28;
  EXPECT_EQ(LookupAndLoad(branch, &persisted), expect_branch);
  // Written through to NVMe: wait until the daemon says every block of the
  // cut survives a crash, then kill -9 it.
  EXPECT_EQ(LookupAndLoad(prompt, &persisted), 40u);
  for (int i = 0; i < 500 && !persisted; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    LookupAndLoad(prompt, &persisted);
  }
  ASSERT_TRUE(persisted) << "the cut's blocks were not persisted within 10 s";
  daemon_->Kill();
  client_.reset();
  Connect();
  if (HasFatalFailure()) return;
  EXPECT_EQ(LookupAndLoad(prompt, &persisted), 40u);
  EXPECT_TRUE(persisted);
  // The operator's view: `kvtier tiers` breaks each group down by tier.
  // Every block was written through to NVMe, and the load after the
  // restart brought the cut back to the host.
  const std::string out = RunCli("tiers --json");
  const nlohmann::json tiers = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(tiers.is_discarded()) << out;
  ASSERT_EQ(tiers["groups"].size(), GetParam().groups.size()) << out;
  for (size_t g = 0; g < GetParam().groups.size(); ++g) {
    const nlohmann::json& row = tiers["groups"][g];
    EXPECT_EQ(row["group"], g) << out;
    EXPECT_GT(row["nvme_blocks"].get<uint64_t>(), 0u) << out;
    EXPECT_GT(row["host_blocks"].get<uint64_t>(), 0u) << out;
    EXPECT_EQ(row["stranded_bytes"].get<uint64_t>(), 0u) << out;
  }
  EXPECT_NE(RunCli("tiers").find("layer groups of hybrid namespaces"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Shapes, HybridEngineRpcTest, ::testing::Values(GptOss(), MambaHybrid()),
                         [](const auto& info) {
                           return info.param.model == "gpt-oss-sim" ? std::string("GptOss")
                                                                    : std::string("MambaHybrid");
                         });

}  // namespace
}  // namespace kvtier
