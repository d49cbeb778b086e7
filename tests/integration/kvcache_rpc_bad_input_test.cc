// Sends a real kvtierd server (in-process, on an ephemeral loopback port) each
// kind of bad input: every one must yield its precise gRPC status and leave
// the daemon's state unchanged.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/integration/kvcache_rpc_fixture.h"

namespace kvtier {
namespace {

using grpc::StatusCode;

// ------------------------------------------------------------------ bad input

TEST_F(KvCacheRpcTest, BadOpenNamespace) {
  v1::OpenNamespaceResponse resp;
  auto open = [&](v1::OpenNamespaceRequest req) {
    grpc::ClientContext ctx;
    return kv_->OpenNamespace(&ctx, req, &resp);
  };
  auto req = OpenRequest("m", 64 * kKiB);
  req.mutable_layout()->set_tokens_per_block(0);
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, open(req));
  req = OpenRequest("m", 64 * kKiB);
  req.clear_layout();
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, open(req));
  req = OpenRequest("m", 64 * kKiB);
  req.mutable_layout()->set_dtype(static_cast<v1::DType>(99));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, open(req));
  req = OpenRequest("m", 64 * kKiB);
  req.mutable_layout()->set_tp_rank(1);
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, open(req));
  req = OpenRequest("", 64 * kKiB);
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, open(req));
  req = OpenRequest("m", 2ull << 20);  // above max_block_bytes (1 MiB)
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, open(req));
  // Bad models: unknown name, both fields, malformed config, a TP the model
  // cannot have. The namespace is not opened.
  req = OpenRequest("m2", 64 * kKiB);
  req.set_cost_model("llama-9");
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, open(req));
  req.set_model_config_json("{}");
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, open(req));
  req.clear_cost_model();
  req.set_model_config_json(R"({"num_hidden_layers": "many"})");
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, open(req));
  req = OpenRequest("m2", 64 * kKiB);
  req.mutable_layout()->set_tp_size(3);
  req.set_cost_model("llama-3.1-8b");  // 8 KV heads over 3 ranks
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, open(req));
  req = OpenRequest("m2", 64 * kKiB);  // 1 layer, 1 KV head of dim 128
  req.set_cost_model("llama-3.2-1b");  // a rank of it holds 8 heads of dim 64
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, open(req));
}

TEST_F(KvCacheRpcTest, BadLookup) {
  v1::LookupResponse resp;
  auto lookup = [&](const std::string& ns, std::vector<std::string> keys, bool lease = false,
                    uint32_t ttl = 0) {
    v1::LookupRequest req;
    req.set_namespace_id(ns);
    for (const auto& k : keys) req.add_keys(k);
    req.set_take_lease(lease);
    req.set_lease_ttl_ms(ttl);
    return Lookup(req, &resp);
  };
  const std::string unknown(32, 'f');
  EXPECT_REJECTED_UNCHANGED(StatusCode::NOT_FOUND, lookup(unknown, {"a"}));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, lookup("not-hex", {"a"}));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, lookup("", {"a"}));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            lookup(ns_, {"a", std::string(33, 'k')}, true));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, lookup(ns_, {"a", ""}, true));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, lookup(ns_, {}));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, lookup(ns_, {"a"}, true, 60'001));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, lookup(ns_, {"a"}, false, 1000));
}

TEST_F(KvCacheRpcTest, BadPut) {
  const std::string unknown(32, 'f');
  const std::string small = DeterministicString("x", 1000);
  // Unknown namespace.
  EXPECT_REJECTED_UNCHANGED(StatusCode::NOT_FOUND,
                            PutChunks({Start(unknown, "x", "", 1000, small)}));
  // Key too long (33 bytes), and parent key too long.
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            PutChunks({Start(ns_, std::string(33, 'k'), "", 1000, small)}));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            PutChunks({Start(ns_, "x", std::string(40, 'p'), 1000, small)}));
  // A chunk larger than the namespace's block size (64 KiB).
  const std::string big = DeterministicString("big", 64 * kKiB + 1);
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            PutChunks({Start(ns_, "x", "a", 1000, ""), Data(big)}));
  // A block declared larger than the block size.
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            PutChunks({Start(ns_, "x", "a", 64 * kKiB + 1, small)}));
  // Data overrunning the declared block.
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            PutChunks({Start(ns_, "x", "a", 999, small)}));
  // Parent not cached.
  EXPECT_REJECTED_UNCHANGED(StatusCode::FAILED_PRECONDITION,
                            PutChunks({Start(ns_, "x", "nope", 1000, small)}));
  // Stream ends mid-block; no chunks at all; data before any key.
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            PutChunks({Start(ns_, "x", "a", 2000, small)}));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, PutChunks({}));
  v1::PutChunk headless = Data(small);
  headless.set_namespace_id(ns_);
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, PutChunks({headless}));
  // block_bytes missing on a block's first chunk.
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            PutChunks({Start(ns_, "x", "a", 0, small)}));
  // Two namespaces in one Put.
  const std::string other = Open("model-b", 64 * kKiB);
  EXPECT_REJECTED_UNCHANGED(
      StatusCode::INVALID_ARGUMENT,
      PutChunks({Start(ns_, "x", "a", 1000, small), Start(other, "y", "", 1000, small)}));
  // A good block followed by a bad one: all or nothing.
  EXPECT_REJECTED_UNCHANGED(
      StatusCode::INVALID_ARGUMENT,
      PutChunks({Start(ns_, "x", "a", 1000, small), Start(ns_, "y", "x", 10, small)}));
  // A chunk that is not a PutChunk (namespace_id, a proto3 string, not
  // UTF-8: protobuf's client only logs it): refused naming the chunk, and
  // the block before it is not stored.
  v1::PutChunk not_utf8 = Data(small);
  not_utf8.set_namespace_id(std::string("\xc3\x28", 2));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            PutChunks({Start(ns_, "x", "a", 1000, small), not_utf8}));
  const grpc::Status malformed = PutChunks({Start(ns_, "x", "a", 1000, small), not_utf8});
  EXPECT_EQ(malformed.error_message(), "chunk 1: malformed PutChunk");
  // Key cached under another parent.
  EXPECT_REJECTED_UNCHANGED(StatusCode::ALREADY_EXISTS,
                            PutChunks({Start(ns_, "b", "r", 1000, small)}));
  // A message above the daemon's max_message_bytes (2 MiB), refused by gRPC.
  EXPECT_REJECTED_UNCHANGED(
      StatusCode::RESOURCE_EXHAUSTED,
      PutChunks({Start(ns_, "x", "a", 1000, DeterministicString("huge", 3 << 20))}));
}

TEST_F(KvCacheRpcTest, BadGet) {
  std::vector<std::string> blocks;
  EXPECT_REJECTED_UNCHANGED(StatusCode::NOT_FOUND, Get(ns_, {"a", "missing"}, &blocks));
  EXPECT_TRUE(blocks.empty());
  EXPECT_REJECTED_UNCHANGED(StatusCode::NOT_FOUND, Get(std::string(32, 'e'), {"a"}, &blocks));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            Get(ns_, {std::string(33, 'k')}, &blocks));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, Get(ns_, {}, &blocks));
  EXPECT_TRUE(blocks.empty());
}

TEST_F(KvCacheRpcTest, BadRelease) {
  v1::ReleaseResponse resp;
  auto release = [&](const std::string& id) {
    grpc::ClientContext ctx;
    v1::ReleaseRequest req;
    req.set_lease_id(id);
    return kv_->Release(&ctx, req, &resp);
  };
  EXPECT_REJECTED_UNCHANGED(StatusCode::NOT_FOUND, release("0123456789abcdef0123456789abcdef"));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, release(""));
}

TEST_F(KvCacheRpcTest, BadDelete) {
  v1::DeleteResponse resp;
  auto del = [&](const std::string& ns, std::vector<std::string> keys, bool recursive) {
    grpc::ClientContext ctx;
    v1::DeleteRequest req;
    req.set_namespace_id(ns);
    for (const auto& k : keys) req.add_keys(k);
    req.set_recursive(recursive);
    return kv_->Delete(&ctx, req, &resp);
  };
  EXPECT_REJECTED_UNCHANGED(StatusCode::NOT_FOUND, del(ns_, {"c", "missing"}, false));
  EXPECT_REJECTED_UNCHANGED(StatusCode::NOT_FOUND, del(std::string(32, 'e'), {"a"}, false));
  EXPECT_REJECTED_UNCHANGED(StatusCode::FAILED_PRECONDITION, del(ns_, {"a"}, false));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT, del(ns_, {std::string(33, 'k')}, true));
}

TEST_F(KvCacheRpcTest, BadPutOnAFullTierEvictsNothing) {
  // Fill the 32 MiB tier: 31 slabs of 64 KiB blocks are free (one slab holds
  // the 12 KiB class of "r"), 3 slots of them are taken by a, b, c.
  for (int i = 0; i < 493; ++i)
    ASSERT_TRUE(PutChain(ns_, {absl::StrCat("f", i)}, "", 64 * kKiB).ok());
  {
    grpc::ClientContext ctx;
    v1::ListTiersResponse tiers;
    ASSERT_TRUE(admin_->ListTiers(&ctx, v1::ListTiersRequest(), &tiers).ok());
    // Every 64 KiB slot is taken; the 12 KiB slab holds only "r".
    ASSERT_EQ(tiers.tiers(0).used_bytes(), tiers.tiers(0).capacity_bytes() - (1 << 20) + 12 * kKiB);
  }
  const std::string small = DeterministicString("x", 1000);
  const std::string big = DeterministicString("big", 64 * kKiB + 1);
  // Every error visible on a block's first chunk is caught before space is
  // reserved, so nothing is evicted (State() includes the eviction count).
  EXPECT_REJECTED_UNCHANGED(StatusCode::NOT_FOUND,
                            PutChunks({Start(std::string(32, 'f'), "x", "", 1000, small)}));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            PutChunks({Start(ns_, std::string(33, 'k'), "", 1000, small)}));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            PutChunks({Start(ns_, "x", "a", 64 * kKiB + 1, big)}));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            PutChunks({Start(ns_, "x", "a", 64 * kKiB, big)}));
  EXPECT_REJECTED_UNCHANGED(StatusCode::FAILED_PRECONDITION,
                            PutChunks({Start(ns_, "x", "nope", 1000, small)}));
  EXPECT_REJECTED_UNCHANGED(StatusCode::ALREADY_EXISTS,
                            PutChunks({Start(ns_, "b", "r", 1000, small)}));
  // A good Put still succeeds, evicting exactly one cold block.
  ASSERT_TRUE(PutChain(ns_, {"fresh"}, "", 64 * kKiB).ok());
  grpc::ClientContext ctx;
  v1::GetStatusResponse st;
  ASSERT_TRUE(admin_->GetStatus(&ctx, v1::GetStatusRequest(), &st).ok());
  EXPECT_EQ(st.counters().evictions(), 1u);
}

TEST_F(KvCacheRpcTest, CancelledPutStoresNothing) {
  const std::string before = State();
  {
    grpc::ClientContext ctx;
    v1::PutResponse resp;
    auto writer = kv_->Put(&ctx, &resp);
    const std::string data = DeterministicString("whole", 4096);
    ASSERT_TRUE(writer->Write(Start(ns_, "whole", "a", data.size(), data)));
    // Let the server take the complete block and wait for more, then cancel:
    // the stream never finished, so nothing may be stored.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ctx.TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), StatusCode::CANCELLED);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the server's handler ends
  EXPECT_EQ(Matched(ns_, {"a", "whole"}), 1u);
  EXPECT_EQ(State(), before);
}

TEST_F(KvCacheRpcTest, GetAndDeleteNeverCrossNamespaces) {
  const std::string other = Open("model-b", 64 * kKiB);
  std::vector<std::string> blocks;
  EXPECT_EQ(Get(other, {"a"}, &blocks).error_code(), StatusCode::NOT_FOUND);
  EXPECT_TRUE(blocks.empty());
  grpc::ClientContext ctx;
  v1::DeleteRequest del;
  del.set_namespace_id(other);
  del.add_keys("c");
  v1::DeleteResponse resp;
  EXPECT_EQ(kv_->Delete(&ctx, del, &resp).error_code(), StatusCode::NOT_FOUND);
  EXPECT_EQ(Matched(ns_, {"a", "b", "c"}), 3u);
  // Same key in the other namespace holds its own bytes.
  ASSERT_TRUE(PutChain(other, {"a"}, "", 64 * kKiB).ok());
  ASSERT_TRUE(Get(other, {"a"}, &blocks).ok());
  EXPECT_EQ(blocks[0], DeterministicString(other + "a", 64 * kKiB));
  EXPECT_NE(blocks[0], DeterministicString(ns_ + "a", 64 * kKiB));
}

TEST(DaemonStartTest, MalformedConfigIsRejected) {
  DaemonConfig c = DefaultConfig(4ull << 30);
  c.listen = "127.0.0.1:0";
  c.metrics_listen = "off";
  c.max_block_bytes = c.host_slab_bytes * 2;
  EXPECT_EQ(Daemon::Start(c).status().code(), absl::StatusCode::kInvalidArgument);
  DaemonConfig d = DefaultConfig(4ull << 30);
  EXPECT_EQ(ApplyYaml("host_tier:\n  size: 1GiB\n", &d).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DaemonStartTest, AddressInUseIsUnavailable) {
  DaemonConfig c = DefaultConfig(4ull << 30);
  c.listen = "127.0.0.1:0";
  c.metrics_listen = "off";
  c.host_tier_bytes = c.host_slab_bytes;
  c.log_level = "off";
  auto first = Daemon::Start(c);
  ASSERT_TRUE(first.ok());
  c.listen = (*first)->listen_address();
  EXPECT_EQ(Daemon::Start(c).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace kvtier
