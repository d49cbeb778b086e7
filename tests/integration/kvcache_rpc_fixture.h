// KvCacheRpcTest: a real kvtierd server (in-process, on an ephemeral loopback
// port) with a namespace holding a chain a -> b -> c and a lone root r, and
// the KvCache and Admin calls the integration tests make of it. Test-only.
#ifndef KVTIER_TESTS_INTEGRATION_KVCACHE_RPC_FIXTURE_H_
#define KVTIER_TESTS_INTEGRATION_KVCACHE_RPC_FIXTURE_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"
#include "testing/test_bytes.h"

namespace kvtier {

inline constexpr uint64_t kKiB = 1024;

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
      const std::string data = DeterministicString(ns + k, size);
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

// Runs `bad`, expects `code`, and checks that nothing observable changed.
#define EXPECT_REJECTED_UNCHANGED(code, bad)                       \
  do {                                                             \
    const std::string before = State();                            \
    const grpc::Status st = (bad);                                 \
    EXPECT_EQ(st.error_code(), code) << st.error_message();        \
    EXPECT_FALSE(st.error_message().empty());                      \
    EXPECT_EQ(State(), before) << "state changed after rejection"; \
  } while (0)

}  // namespace kvtier

#endif  // KVTIER_TESTS_INTEGRATION_KVCACHE_RPC_FIXTURE_H_
