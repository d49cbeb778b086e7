// Exercises every KvCache and Admin RPC of a real kvtierd server (in-process,
// on an ephemeral loopback port) on the happy path; kvcache_rpc_bad_input_test.cc
// sends each kind of bad input.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/integration/kvcache_rpc_fixture.h"

namespace kvtier {
namespace {

using grpc::StatusCode;

// ----------------------------------------------------------------- happy path

TEST_F(KvCacheRpcTest, OpenNamespaceIsIdempotentAndSaltSeparates) {
  grpc::ClientContext ctx;
  v1::OpenNamespaceResponse resp;
  ASSERT_TRUE(kv_->OpenNamespace(&ctx, OpenRequest("model-a", 64 * kKiB), &resp).ok());
  EXPECT_EQ(resp.namespace_id(), ns_);
  EXPECT_FALSE(resp.created());
  EXPECT_EQ(resp.namespace_id().size(), 32u);
  auto salted = OpenRequest("model-a", 64 * kKiB);
  salted.set_salt("tenant-2");
  grpc::ClientContext ctx2;
  ASSERT_TRUE(kv_->OpenNamespace(&ctx2, salted, &resp).ok());
  EXPECT_NE(resp.namespace_id(), ns_);
  EXPECT_TRUE(resp.created());
  EXPECT_EQ(Matched(resp.namespace_id(), {"a", "b"}), 0u);  // never across namespaces
}

TEST_F(KvCacheRpcTest, PutGetRoundTripAcrossChunks) {
  std::vector<std::string> blocks;
  ASSERT_TRUE(Get(ns_, {"a", "b", "c", "r"}, &blocks).ok());
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[0], DeterministicString(ns_ + "a", 64 * kKiB));
  EXPECT_EQ(blocks[2], DeterministicString(ns_ + "c", 64 * kKiB));
  EXPECT_EQ(blocks[3], DeterministicString(ns_ + "r", 10000));
  EXPECT_EQ(last_get_chunks_, 3u * 4 + 1);  // 16 KiB chunks by default
  blocks.clear();
  ASSERT_TRUE(Get(ns_, {"b"}, &blocks, 4096).ok());
  EXPECT_EQ(last_get_chunks_, 16u);
  EXPECT_EQ(blocks[0], DeterministicString(ns_ + "b", 64 * kKiB));
  // Re-putting a cached block stores nothing new.
  v1::PutResponse resp;
  const std::string data = DeterministicString(ns_ + "b", 64 * kKiB);
  ASSERT_TRUE(PutChunks({Start(ns_, "b", "a", data.size(), data)}, &resp).ok());
  EXPECT_EQ(resp.blocks_stored(), 0u);
  EXPECT_EQ(resp.blocks_already_cached(), 1u);
}

TEST_F(KvCacheRpcTest, LookupLeaseReleaseAndDelete) {
  v1::LookupRequest req;
  req.set_namespace_id(ns_);
  for (const char* k : {"a", "b", "c", "d"}) req.add_keys(k);
  req.set_take_lease(true);
  req.set_lease_ttl_ms(5000);
  v1::LookupResponse resp;
  ASSERT_TRUE(Lookup(req, &resp).ok());
  EXPECT_EQ(resp.matched(), 3u);
  ASSERT_EQ(resp.blocks_size(), 3);
  EXPECT_EQ(resp.blocks(1).key(), "b");
  EXPECT_EQ(resp.blocks(1).size_bytes(), 64 * kKiB);
  EXPECT_EQ(resp.blocks(1).tier(), v1::TIER_KIND_HOST);
  ASSERT_EQ(resp.lease_id().size(), 32u);
  EXPECT_GT(resp.lease_expires_unix_ms(), 0u);

  // Leased blocks cannot be deleted.
  const std::string before = State();
  v1::DeleteRequest del;
  del.set_namespace_id(ns_);
  del.add_keys("c");
  v1::DeleteResponse dresp;
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(kv_->Delete(&ctx, del, &dresp).error_code(), StatusCode::FAILED_PRECONDITION);
  }
  EXPECT_EQ(State(), before);

  v1::ReleaseRequest rel;
  rel.set_lease_id(resp.lease_id());
  v1::ReleaseResponse rresp;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(kv_->Release(&ctx, rel, &rresp).ok());
    EXPECT_EQ(rresp.blocks_released(), 3u);
  }
  {
    grpc::ClientContext ctx;
    del.set_recursive(true);
    del.set_keys(0, "b");
    ASSERT_TRUE(kv_->Delete(&ctx, del, &dresp).ok());
    EXPECT_EQ(dresp.blocks_deleted(), 2u);
    EXPECT_EQ(dresp.bytes_freed(), 128 * kKiB);
  }
  EXPECT_EQ(Matched(ns_, {"a", "b", "c"}), 1u);
}

// compact_reply answers what `blocks` says of each matched block (less its
// key) in packed arrays, and leaves `blocks` empty.
TEST_F(KvCacheRpcTest, CompactLookupAnswersWhatAFullOneDoes) {
  // A last block of its own size, so an array out of order shows.
  ASSERT_TRUE(PutChain(ns_, {"e"}, "b", 10000).ok());
  v1::LookupRequest req;
  req.set_namespace_id(ns_);
  for (const char* k : {"a", "b", "e", "d"}) req.add_keys(k);
  v1::LookupResponse full;
  ASSERT_TRUE(Lookup(req, &full).ok());
  ASSERT_EQ(full.blocks_size(), 3);
  EXPECT_EQ(full.blocks(2).size_bytes(), 10000u);
  req.set_compact_reply(true);
  v1::LookupResponse compact;
  ASSERT_TRUE(Lookup(req, &compact).ok());
  EXPECT_EQ(compact.matched(), full.matched());
  EXPECT_EQ(compact.blocks_size(), 0);
  const v1::CompactBlocks& c = compact.compact_blocks();
  ASSERT_EQ(c.size_bytes_size(), 3);
  ASSERT_EQ(c.tier_size(), 3);
  ASSERT_EQ(c.persisted_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c.size_bytes(i), full.blocks(i).size_bytes()) << i;
    EXPECT_EQ(c.tier(i), full.blocks(i).tier()) << i;
    EXPECT_EQ(c.persisted(i), full.blocks(i).persisted()) << i;
  }
  EXPECT_EQ(c.size_bytes(1), 64 * kKiB);
  EXPECT_EQ(c.size_bytes(2), 10000u);
  EXPECT_EQ(c.tier(1), v1::TIER_KIND_HOST);

  // Nothing matched: no arrays.
  req.set_keys(0, "not-cached");
  v1::LookupResponse none;
  ASSERT_TRUE(Lookup(req, &none).ok());
  EXPECT_EQ(none.matched(), 0u);
  EXPECT_FALSE(none.has_compact_blocks());
}

TEST_F(KvCacheRpcTest, CorruptedBlockIsNeverServed) {
  auto id = NamespaceId::FromHex(ns_);
  ASSERT_TRUE(id.ok());
  auto bytes = daemon_->cache().MutableBytesForTesting(*id, *BlockKey::Create("b"));
  ASSERT_TRUE(bytes.ok());
  (*bytes)[100] ^= 0xff;
  std::vector<std::string> blocks;
  grpc::Status s = Get(ns_, {"a", "b"}, &blocks);
  EXPECT_EQ(s.error_code(), StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("checksum"), std::string::npos);
  EXPECT_TRUE(blocks.empty()) << "no byte may be sent before verification";
  EXPECT_EQ(Matched(ns_, {"a", "b", "c"}), 1u);  // b and its child c dropped
  grpc::ClientContext ctx;
  v1::GetStatusResponse st;
  ASSERT_TRUE(admin_->GetStatus(&ctx, v1::GetStatusRequest(), &st).ok());
  EXPECT_EQ(st.counters().checksum_mismatches(), 1u);
  EXPECT_EQ(st.stranded_blocks(), 0u);
}

TEST_F(KvCacheRpcTest, AdminReportsStatusTiersAndNamespaces) {
  grpc::ClientContext ctx;
  v1::GetStatusResponse st;
  ASSERT_TRUE(admin_->GetStatus(&ctx, v1::GetStatusRequest(), &st).ok());
  EXPECT_EQ(st.listen_address(), daemon_->listen_address());
  EXPECT_FALSE(st.build().version().empty());
  EXPECT_FALSE(st.gpu().detail().empty());
  EXPECT_EQ(st.namespaces(), 1u);
  EXPECT_EQ(st.blocks(), 4u);
  EXPECT_EQ(st.bytes(), 3 * 64 * kKiB + 10000);
  grpc::ClientContext ctx2;
  v1::ListTiersResponse tiers;
  ASSERT_TRUE(admin_->ListTiers(&ctx2, v1::ListTiersRequest(), &tiers).ok());
  ASSERT_EQ(tiers.tiers_size(), 1);
  EXPECT_EQ(tiers.tiers(0).kind(), v1::TIER_KIND_HOST);
  EXPECT_EQ(tiers.tiers(0).capacity_bytes(), 32ull << 20);
  EXPECT_EQ(tiers.tiers(0).stored_bytes(), st.bytes());
  EXPECT_EQ(tiers.tiers(0).used_bytes(), 3 * 64 * kKiB + 12 * kKiB);  // 10000 -> 12 KiB class
  EXPECT_EQ(tiers.tiers(0).evictable_blocks(), 2u);                   // c and r
  grpc::ClientContext ctx3;
  v1::ListNamespacesResponse nss;
  ASSERT_TRUE(admin_->ListNamespaces(&ctx3, v1::ListNamespacesRequest(), &nss).ok());
  ASSERT_EQ(nss.namespaces_size(), 1);
  EXPECT_EQ(nss.namespaces(0).namespace_id(), ns_);
  EXPECT_EQ(nss.namespaces(0).model_id(), "model-a");
  EXPECT_EQ(nss.namespaces(0).layout().head_dim(), 128u);
  EXPECT_EQ(nss.namespaces(0).blocks(), 4u);
  EXPECT_FALSE(nss.namespaces(0).salted());
}

// Waits for one completion-queue event and returns whether it succeeded.
bool Await(grpc::CompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  return cq->Next(&tag, &ok) && ok;
}

std::string Flatten(const grpc::ByteBuffer& bb) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!bb.Dump(&slices).ok()) return out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// Transfer reports itself unavailable, with the reason, where there is no
// peer transport: a build without UCX, or peer.transport off.
TEST_F(KvCacheRpcTest, TransferWithoutATransportIsUnavailableAndSaysWhy) {
  v1::GetStatusResponse st;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(admin_->GetStatus(&ctx, v1::GetStatusRequest(), &st).ok());
  }
  // No peer.* key configures transfer here, so it is off even with UCX.
  EXPECT_FALSE(st.transfer().available()) << st.transfer().detail();
  EXPECT_EQ(st.transfer().role(), "both");
  auto transfer = [&](v1::KvCache::Stub& stub) {
    v1::TransferRequest req;
    req.set_namespace_id(ns_);
    *req.add_keys() = std::string("a");
    req.set_peer("127.0.0.1:1");
    req.set_direction(v1::TRANSFER_DIRECTION_PUSH);
    grpc::ClientContext ctx;
    v1::TransferResponse resp;
    return stub.Transfer(&ctx, req, &resp);
  };
  if (!st.build().with_ucx()) {
    EXPECT_NE(st.transfer().detail().find("without UCX"), std::string::npos);
    grpc::Status s = transfer(*kv_);
    EXPECT_EQ(s.error_code(), StatusCode::UNAVAILABLE);
    EXPECT_NE(s.error_message().find("without UCX"), std::string::npos) << s.error_message();
  }
  DaemonConfig c = DefaultConfig(4ull << 30);
  c.listen = "127.0.0.1:0";
  c.metrics_listen = "off";
  c.host_tier_bytes = 16ull << 20;
  c.host_slab_bytes = 1ull << 20;
  c.max_block_bytes = 1ull << 20;
  c.costmodel_probe_tiers = false;
  c.peer_transport = "off";
  auto d = Daemon::Start(c);
  ASSERT_TRUE(d.ok()) << d.status();
  auto channel = grpc::CreateChannel((*d)->listen_address(), grpc::InsecureChannelCredentials());
  auto kv = v1::KvCache::NewStub(channel);
  {
    grpc::ClientContext ctx;
    v1::OpenNamespaceResponse resp;
    ASSERT_TRUE(kv->OpenNamespace(&ctx, OpenRequest("model-a", 64 * kKiB), &resp).ok());
  }
  grpc::Status s = transfer(*kv);
  EXPECT_EQ(s.error_code(), StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("peer.transport: off"), std::string::npos) << s.error_message();
}

TEST_F(KvCacheRpcTest, HealthCheckReportsServing) {
  grpc::GenericStub generic(channel_);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);  // HealthCheckRequest{service: ""}
  auto call = generic.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  ASSERT_TRUE(Await(&cq));
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(Flatten(response), std::string("\x08\x01", 2));  // status: SERVING
}

TEST_F(KvCacheRpcTest, ReflectionListsTheServices) {
  grpc::GenericStub generic(channel_);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  auto call = generic.PrepareCall(
      &ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(Await(&cq));
  grpc::Slice list("\x3a\x00", 2);  // ServerReflectionRequest{list_services: ""}
  grpc::ByteBuffer request(&list, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  ASSERT_TRUE(Await(&cq));
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  ASSERT_TRUE(Await(&cq));
  const std::string bytes = Flatten(response);
  EXPECT_NE(bytes.find("kvtier.v1.KvCache"), std::string::npos);
  EXPECT_NE(bytes.find("kvtier.v1.Admin"), std::string::npos);
  EXPECT_NE(bytes.find("kvtier.v1.Peer"), std::string::npos);
  EXPECT_NE(bytes.find("grpc.health.v1.Health"), std::string::npos);
  call->WritesDone(reinterpret_cast<void*>(4));
  Await(&cq);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  ASSERT_TRUE(Await(&cq));
  EXPECT_TRUE(status.ok());
}

// Llama-3.2-1B's per-rank layout: 2 * 16 * 8 * 64 * 2 bytes * 16 tokens =
// 256 KiB blocks.
TEST_F(KvCacheRpcTest, LookupCarriesAPlanWhoseCutFollowsTierBandwidth) {
  v1::OpenNamespaceRequest req;
  req.set_model_id("meta-llama/Llama-3.2-1B");
  auto* l = req.mutable_layout();
  l->set_num_layers(16);
  l->set_num_kv_heads(8);
  l->set_head_dim(64);
  l->set_dtype(v1::DTYPE_BF16);
  l->set_tokens_per_block(16);
  l->set_tp_size(1);
  req.set_cost_model("llama-3.2-1b");
  v1::OpenNamespaceResponse opened;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(kv_->OpenNamespace(&ctx, req, &opened).ok());
  }
  EXPECT_TRUE(opened.plans_enabled()) << opened.plans_note();
  EXPECT_NE(opened.plans_note().find("h100-sxm"), std::string::npos) << opened.plans_note();
  EXPECT_TRUE(opened.nvme_admitted());
  const std::string ns = opened.namespace_id();
  ASSERT_TRUE(PutChain(ns, {"p0", "p1", "p2", "p3"}, "", 256 * kKiB).ok());

  v1::LookupRequest lr;
  lr.set_namespace_id(ns);
  for (const char* k : {"p0", "p1", "p2", "p3", "p4"}) lr.add_keys(k);
  auto plan = [&](double host_bytes_per_s) {
    daemon_->cache().host_meter().Seed(host_bytes_per_s, 5e-6, "test");
    v1::LookupResponse resp;
    EXPECT_TRUE(Lookup(lr, &resp).ok());
    EXPECT_EQ(resp.matched(), 4u);
    EXPECT_EQ(resp.blocks(0).tier(), v1::TIER_KIND_HOST);
    EXPECT_TRUE(resp.has_plan());
    return resp.plan();
  };
  v1::FetchPlan fast = plan(50e9);
  EXPECT_EQ(fast.fetch_blocks(), 4u);
  EXPECT_EQ(fast.prompt_tokens(), 64u);
  EXPECT_GT(fast.fetch_seconds(), 0);
  EXPECT_LT(fast.total_seconds(), fast.recompute_all_seconds());
  v1::FetchPlan slow = plan(1e6);  // 1 MB/s: fetching a 256 KiB block takes 0.26 s
  EXPECT_EQ(slow.fetch_blocks(), 0u);
  EXPECT_DOUBLE_EQ(slow.total_seconds(), slow.recompute_all_seconds());
  // prompt_tokens widens what the plan covers.
  lr.set_prompt_tokens(1000);
  EXPECT_EQ(plan(50e9).prompt_tokens(), 1000u);

  // No model, no plan.
  v1::LookupRequest plain;
  plain.set_namespace_id(ns_);
  plain.add_keys("a");
  v1::LookupResponse resp;
  ASSERT_TRUE(Lookup(plain, &resp).ok());
  EXPECT_FALSE(resp.has_plan());

  grpc::ClientContext ctx;
  v1::GetStatusResponse status;
  ASSERT_TRUE(admin_->GetStatus(&ctx, v1::GetStatusRequest(), &status).ok());
  EXPECT_TRUE(status.planner().enabled());
  EXPECT_EQ(status.planner().gpu(), "h100-sxm");
  ASSERT_GE(status.planner().tiers_size(), 1);
  EXPECT_EQ(status.planner().tiers(0).tier(), v1::TIER_KIND_HOST);
  grpc::ClientContext ctx2;
  v1::ListNamespacesResponse nss;
  ASSERT_TRUE(admin_->ListNamespaces(&ctx2, v1::ListNamespacesRequest(), &nss).ok());
  bool found = false;
  for (const auto& n : nss.namespaces()) {
    if (n.namespace_id() == ns) {
      found = true;
      EXPECT_EQ(n.cost_model(), "llama-3.2-1b");
      EXPECT_TRUE(n.nvme_admitted());
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace kvtier
