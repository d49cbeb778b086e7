// Exercises every KvCache and Admin RPC of a real kvtierd server (in-process,
// on an ephemeral loopback port), including each kind of bad input: every one
// must yield its precise gRPC status and leave the daemon's state unchanged.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"

namespace kvtier {
namespace {

using grpc::StatusCode;

constexpr uint64_t kKiB = 1024;

std::string Bytes(const std::string& tag, size_t n) {
  std::string out(n, '\0');
  uint64_t x = std::hash<std::string>()(tag) | 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = static_cast<char>(x >> 56);
  }
  return out;
}

class KvCacheRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DaemonConfig c = DefaultConfig(4ull << 30);
    c.listen = "127.0.0.1:0";
    c.metrics_listen = "off";
    c.host_tier_bytes = 32ull << 20;
    c.host_slab_bytes = 1ull << 20;
    c.max_block_bytes = 1ull << 20;
    c.max_message_bytes = 2ull << 20;
    c.get_chunk_bytes = 16 * kKiB;  // blocks span several Get chunks
    c.default_lease_ttl_ms = 10'000;
    c.max_lease_ttl_ms = 60'000;
    c.costmodel_gpu = "h100-sxm";  // no GPU here: price recompute for an H100
    auto d = Daemon::Start(c);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(8 << 20);
    args.SetMaxReceiveMessageSize(8 << 20);
    channel_ = grpc::CreateCustomChannel(daemon_->listen_address(),
                                         grpc::InsecureChannelCredentials(), args);
    kv_ = v1::KvCache::NewStub(channel_);
    admin_ = v1::Admin::NewStub(channel_);
    ns_ = Open("model-a", 64 * kKiB);
    // A cached chain a -> b -> c and a lone root r.
    ASSERT_TRUE(PutChain(ns_, {"a", "b", "c"}, "", 64 * kKiB).ok());
    ASSERT_TRUE(PutChain(ns_, {"r"}, "", 10000).ok());
  }

  // Layout with block_bytes = 2 * 1 * 1 * 128 * tokens * 2 bytes = 512 * tokens.
  static v1::OpenNamespaceRequest OpenRequest(const std::string& model, uint64_t block_bytes) {
    v1::OpenNamespaceRequest req;
    req.set_model_id(model);
    auto* l = req.mutable_layout();
    l->set_num_layers(1);
    l->set_num_kv_heads(1);
    l->set_head_dim(128);
    l->set_dtype(v1::DTYPE_BF16);
    l->set_tokens_per_block(static_cast<uint32_t>(block_bytes / 512));
    l->set_tp_size(1);
    return req;
  }

  std::string Open(const std::string& model, uint64_t block_bytes) {
    grpc::ClientContext ctx;
    v1::OpenNamespaceResponse resp;
    grpc::Status s = kv_->OpenNamespace(&ctx, OpenRequest(model, block_bytes), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.block_bytes(), block_bytes);
    return resp.namespace_id();
  }

  grpc::Status PutChunks(const std::vector<v1::PutChunk>& chunks, v1::PutResponse* resp = nullptr) {
    grpc::ClientContext ctx;
    v1::PutResponse local;
    auto writer = kv_->Put(&ctx, resp != nullptr ? resp : &local);
    for (const auto& c : chunks) {
      if (!writer->Write(c)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  static v1::PutChunk Start(const std::string& ns, const std::string& key,
                            const std::string& parent, uint64_t size, const std::string& data) {
    v1::PutChunk c;
    c.set_namespace_id(ns);
    c.set_key(key);
    c.set_parent_key(parent);
    c.set_block_bytes(size);
    c.set_data(data);
    return c;
  }
  static v1::PutChunk Data(const std::string& data) {
    v1::PutChunk c;
    c.set_data(data);
    return c;
  }

  // Each block in two chunks.
  grpc::Status PutChain(const std::string& ns, const std::vector<std::string>& keys,
                        std::string parent, uint64_t size) {
    std::vector<v1::PutChunk> chunks;
    for (const auto& k : keys) {
      const std::string data = Bytes(ns + k, size);
      chunks.push_back(Start(ns, k, parent, size, data.substr(0, size / 2)));
      chunks.push_back(Data(data.substr(size / 2)));
      parent = k;
    }
    return PutChunks(chunks);
  }

  grpc::Status Lookup(const v1::LookupRequest& req, v1::LookupResponse* resp) {
    grpc::ClientContext ctx;
    return kv_->Lookup(&ctx, req, resp);
  }

  uint32_t Matched(const std::string& ns, const std::vector<std::string>& keys) {
    v1::LookupRequest req;
    req.set_namespace_id(ns);
    for (const auto& k : keys) req.add_keys(k);
    v1::LookupResponse resp;
    EXPECT_TRUE(Lookup(req, &resp).ok());
    return resp.matched();
  }

  // Returns the concatenated bytes of the blocks, checking the chunk framing.
  grpc::Status Get(const std::string& ns, const std::vector<std::string>& keys,
                   std::vector<std::string>* blocks, uint32_t max_chunk = 0) {
    v1::GetRequest req;
    req.set_namespace_id(ns);
    for (const auto& k : keys) req.add_keys(k);
    req.set_max_chunk_bytes(max_chunk);
    grpc::ClientContext ctx;
    auto reader = kv_->Get(&ctx, req);
    v1::GetChunk chunk;
    size_t chunks = 0;
    while (reader->Read(&chunk)) {
      ++chunks;
      if (!chunk.key().empty()) {
        EXPECT_EQ(chunk.offset(), 0u);
        EXPECT_EQ(chunk.key(), keys[blocks->size()]);
        blocks->emplace_back();
        blocks->back().reserve(chunk.block_bytes());
      }
      EXPECT_EQ(chunk.offset(), blocks->back().size());
      blocks->back() += chunk.data();
    }
    last_get_chunks_ = chunks;
    return reader->Finish();
  }

  // Everything a failed request must not change.
  std::string State() {
    std::string out;
    {
      grpc::ClientContext ctx;
      v1::GetStatusResponse s;
      EXPECT_TRUE(admin_->GetStatus(&ctx, v1::GetStatusRequest(), &s).ok());
      const auto& c = s.counters();
      out += absl::StrCat("ns=", s.namespaces(), " blocks=", s.blocks(), " bytes=", s.bytes(),
                          " leases=", s.active_leases(), " stranded=", s.stranded_blocks(),
                          " put=", c.blocks_put(), "/", c.bytes_put(), " evict=", c.evictions(),
                          " del=", c.blocks_deleted(), " bad=", c.checksum_mismatches(),
                          " leased=", c.leases_taken(), "\n");
    }
    {
      grpc::ClientContext ctx;
      v1::ListNamespacesResponse r;
      EXPECT_TRUE(admin_->ListNamespaces(&ctx, v1::ListNamespacesRequest(), &r).ok());
      out += r.DebugString();
    }
    {
      grpc::ClientContext ctx;
      v1::ListTiersResponse r;
      EXPECT_TRUE(admin_->ListTiers(&ctx, v1::ListTiersRequest(), &r).ok());
      out += r.DebugString();
    }
    std::vector<std::string> blocks;
    EXPECT_TRUE(Get(ns_, {"a", "b", "c", "r"}, &blocks).ok());
    for (const auto& b : blocks) out += absl::StrCat(std::hash<std::string>()(b), ",");
    return out;
  }

  std::unique_ptr<Daemon> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::KvCache::Stub> kv_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::string ns_;
  size_t last_get_chunks_ = 0;
};

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
  EXPECT_EQ(blocks[0], Bytes(ns_ + "a", 64 * kKiB));
  EXPECT_EQ(blocks[2], Bytes(ns_ + "c", 64 * kKiB));
  EXPECT_EQ(blocks[3], Bytes(ns_ + "r", 10000));
  EXPECT_EQ(last_get_chunks_, 3u * 4 + 1);  // 16 KiB chunks by default
  blocks.clear();
  ASSERT_TRUE(Get(ns_, {"b"}, &blocks, 4096).ok());
  EXPECT_EQ(last_get_chunks_, 16u);
  EXPECT_EQ(blocks[0], Bytes(ns_ + "b", 64 * kKiB));
  // Re-putting a cached block stores nothing new.
  v1::PutResponse resp;
  const std::string data = Bytes(ns_ + "b", 64 * kKiB);
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

// ------------------------------------------------------------------ bad input

// Runs `bad`, expects `code`, and checks that nothing observable changed.
#define EXPECT_REJECTED_UNCHANGED(code, bad)                       \
  do {                                                             \
    const std::string before = State();                            \
    const grpc::Status st = (bad);                                 \
    EXPECT_EQ(st.error_code(), code) << st.error_message();        \
    EXPECT_FALSE(st.error_message().empty());                      \
    EXPECT_EQ(State(), before) << "state changed after rejection"; \
  } while (0)

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
  const std::string small = Bytes("x", 1000);
  // Unknown namespace.
  EXPECT_REJECTED_UNCHANGED(StatusCode::NOT_FOUND,
                            PutChunks({Start(unknown, "x", "", 1000, small)}));
  // Key too long (33 bytes), and parent key too long.
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            PutChunks({Start(ns_, std::string(33, 'k'), "", 1000, small)}));
  EXPECT_REJECTED_UNCHANGED(StatusCode::INVALID_ARGUMENT,
                            PutChunks({Start(ns_, "x", std::string(40, 'p'), 1000, small)}));
  // A chunk larger than the namespace's block size (64 KiB).
  const std::string big = Bytes("big", 64 * kKiB + 1);
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
  // Key cached under another parent.
  EXPECT_REJECTED_UNCHANGED(StatusCode::ALREADY_EXISTS,
                            PutChunks({Start(ns_, "b", "r", 1000, small)}));
  // A message above the daemon's max_message_bytes (2 MiB), refused by gRPC.
  EXPECT_REJECTED_UNCHANGED(StatusCode::RESOURCE_EXHAUSTED,
                            PutChunks({Start(ns_, "x", "a", 1000, Bytes("huge", 3 << 20))}));
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
  const std::string small = Bytes("x", 1000);
  const std::string big = Bytes("big", 64 * kKiB + 1);
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
    const std::string data = Bytes("whole", 4096);
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
  EXPECT_EQ(blocks[0], Bytes(other + "a", 64 * kKiB));
  EXPECT_NE(blocks[0], Bytes(ns_ + "a", 64 * kKiB));
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
