// Hybrid namespaces over gRPC, the refusals: bad groups name their field,
// encodings and peer transfer are refused for namespaces with groups, a
// group that does not exist fails only its own block, and none of it
// changes what the daemon holds.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvtier/client.h"
#include "server/daemon.h"
#include "testing/test_daemon_config.h"

namespace kvtier {
namespace {

using client::Client;

class HybridNamespaceRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = Daemon::Start(TestDaemonConfig(8ull << 20, 1ull << 20, 1ull << 20));
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    auto c = Client::Connect(daemon_->listen_address());
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
  }

  // Full attention on layer 1, a 32-token window on layer 0: 4 KiB blocks.
  static client::NamespaceOptions Options() {
    client::NamespaceOptions o;
    o.model_id = "hybrid-rpc";
    o.layout = {2,  1, 64, "bf16",
                16, 0, 1,  {{"sliding_window", {0}, 32, 0, 0}, {"full_attention", {1}, 0, 0, 0}}};
    return o;
  }

  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(HybridNamespaceRpcTest, BadGroupsAreRefusedNamingTheField) {
  struct Case {
    void (*mutate)(client::NamespaceOptions&);
    const char* expect;
  } cases[] = {
      {[](client::NamespaceOptions& o) { o.layout.groups[0].window_tokens = 0; },
       "groups[0].window_tokens"},
      {[](client::NamespaceOptions& o) { o.layout.groups[1].layers = {0}; },
       "groups[1].layers names layer 0, already in a group"},
      {[](client::NamespaceOptions& o) { o.layout.groups[1].layers = {2}; },
       "groups[1].layers names layer 2"},
      {[](client::NamespaceOptions& o) { o.layout.groups.pop_back(); },
       "sliding_window needs a full_attention group"},
      {[](client::NamespaceOptions& o) { o.encoding = "fp8"; },
       "encodings are not supported with layer groups"},
  };
  for (const Case& c : cases) {
    client::NamespaceOptions o = Options();
    c.mutate(o);
    absl::StatusOr<client::OpenedNamespace> r = client_->OpenNamespace(o);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.expect;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status();
  }
  client::NamespaceOptions o = Options();
  o.layout.groups[0].kind = "linear";
  EXPECT_EQ(client_->OpenNamespace(o).status().code(), absl::StatusCode::kInvalidArgument);
  // Nothing was opened.
  EXPECT_EQ(daemon_->cache().Snapshot().namespaces, 0u);
}

TEST_F(HybridNamespaceRpcTest, WrongGroupsFailTheirBlocksAndTransferIsRefused) {
  auto ns = client_->OpenNamespace(Options());
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_EQ(ns->group_block_bytes, (std::vector<uint64_t>{4096, 4096}));
  // A Put naming group 2 is refused whole.
  std::vector<std::string> keys = {"a", "a"};
  const std::string x(4096, 'x'), y(4096, 'y');
  std::vector<absl::string_view> data = {x, y};
  client::PutOptions po;
  po.groups = {1, 2};
  absl::StatusOr<client::PutResult> put = client_->PutBlocks(ns->id, keys, data, po);
  EXPECT_EQ(put.status().code(), absl::StatusCode::kInvalidArgument) << put.status();
  EXPECT_NE(put.status().message().find("group 2"), std::string::npos) << put.status();
  EXPECT_EQ(daemon_->cache().Snapshot().blocks, 0u);
  // Both groups in one Put: block "a" is a restorable cut of 1.
  po.groups = {1, 0};
  put = client_->PutBlocks(ns->id, keys, data, po);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->blocks_stored, 2u);
  EXPECT_EQ(put->blocks_unusable, 0u);
  auto hit = client_->Lookup(ns->id, std::vector<std::string>{"a"});
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->matched, 1u);
  ASSERT_EQ(hit->groups.size(), 2u);
  EXPECT_EQ(hit->groups[0].sizes, std::vector<uint64_t>{4096});
  EXPECT_TRUE(hit->tiers.empty());
  auto got = client_->Get(ns->id, std::vector<std::string>{"a"}, 0);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0], y);
  EXPECT_EQ(client_->Get(ns->id, std::vector<std::string>{"a"}, 7).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Peer transfer does not know groups yet: refused, nothing moves.
  auto moved = client_->Transfer(ns->id, std::vector<std::string>{"a"}, "127.0.0.1:1",
                                 client::TransferDirection::kPush);
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kUnimplemented) << moved.status();
  EXPECT_EQ(daemon_->cache().Snapshot().blocks, 2u);
}

}  // namespace
}  // namespace kvtier
