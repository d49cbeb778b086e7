// kvtier::Client against a real in-process kvtierd: an engine's life cycle
// through the library (open, save through shared memory, look up with a
// lease, load, release), the message path, and error codes.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kvtier/chained_hash.h"
#include "kvtier/client.h"
#include "kvtier/shared_region.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"
#include "testing/test_daemon_config.h"

namespace kvtier::client {
namespace {

constexpr uint64_t kBlock = 64 * 1024;  // 1 layer x 1 head x 128 dims x bf16 x 128 tokens x 2

class ClientRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kvtier::DaemonConfig c = kvtier::TestDaemonConfig(16ull << 20, 1ull << 20, 1ull << 20);
    auto d = kvtier::Daemon::Start(c);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    auto client = Client::Connect(daemon_->listen_address());
    ASSERT_TRUE(client.ok());
    client_ = std::move(*client);
    auto region = SharedRegion::Create(32 * kBlock);
    ASSERT_TRUE(region.ok()) << region.status();
    region_ = std::move(*region);
    path_ = region_->path();
    mem_ = region_->data();
  }

  NamespaceOptions Options() const {
    NamespaceOptions o;
    o.model_id = "client-test";
    o.layout = KvLayoutSpec{1, 1, 128, "bf16", 128, 0, 1};
    return o;
  }

  std::unique_ptr<kvtier::Daemon> daemon_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<SharedRegion> region_;
  std::string path_;
  uint8_t* mem_ = nullptr;
};

TEST_F(ClientRpcTest, EngineLifecycleThroughSharedMemory) {
  absl::StatusOr<OpenedNamespace> ns = client_->OpenNamespace(Options());
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_EQ(ns->block_bytes, kBlock);
  // A 4-block prompt keyed by the canonical chained hash.
  std::vector<int32_t> tokens(4 * 128 + 7);
  std::iota(tokens.begin(), tokens.end(), 1000);
  const std::vector<std::string> keys = ChainedBlockKeys(tokens, 128);
  ASSERT_EQ(keys.size(), 4u);
  std::vector<RegionBlockRef> save;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::memset(mem_ + i * kBlock, static_cast<int>(0x40 + i), kBlock);
    save.push_back({keys[i], i ? keys[i - 1] : "", i * kBlock, kBlock, {}});
  }
  absl::StatusOr<std::string> region = client_->RegisterMemory(path_, 32 * kBlock);
  ASSERT_TRUE(region.ok()) << region.status();
  auto saved = client_->SaveAsync(ns->id, *region, save).get();
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->size(), 4u);
  for (const BlockCompletion& c : *saved) EXPECT_TRUE(c.status.ok()) << c.status;

  LookupOptions lo;
  lo.take_lease = true;
  absl::StatusOr<LookupResult> hit = client_->Lookup(ns->id, keys, lo);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->matched, 4u);
  EXPECT_EQ(hit->tiers[0], "host");
  EXPECT_FALSE(hit->lease_id.empty());
  EXPECT_FALSE(hit->plan.has_value());  // no model named

  std::vector<RegionBlockRef> load;
  for (size_t i = 0; i < keys.size(); ++i)
    load.push_back({keys[i], "", (16 + i) * kBlock, kBlock, {}});
  load.push_back({ChainedBlockKey(keys[3], {1, 2, 3}), "", 24 * kBlock, kBlock, {}});  // not cached
  std::vector<BlockCompletion> loaded;
  ASSERT_TRUE(
      client_->Load(ns->id, *region, load, [&](const BlockCompletion& c) { loaded.push_back(c); })
          .ok());
  ASSERT_EQ(loaded.size(), 5u);
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(loaded[i].status.ok()) << loaded[i].status;
    EXPECT_EQ(mem_[(16 + i) * kBlock], 0x40 + i);
    EXPECT_EQ(mem_[(17 + i) * kBlock - 1], 0x40 + i);
  }
  EXPECT_EQ(loaded[4].status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*client_->Release(hit->lease_id), 4u);
  EXPECT_TRUE(client_->UnregisterMemory(*region).ok());
  EXPECT_EQ(client_->UnregisterMemory(*region).code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientRpcTest, MessagePathAndErrors) {
  absl::StatusOr<OpenedNamespace> ns = client_->OpenNamespace(Options());
  ASSERT_TRUE(ns.ok());
  const std::vector<std::string> keys = {"k1", "k2"};
  const std::vector<std::string> data = {std::string(1000, 'a'), std::string(kBlock, 'b')};
  ASSERT_TRUE(client_->Put(ns->id, keys, data).ok());
  absl::StatusOr<std::vector<std::string>> got = client_->Get(ns->id, keys);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, data);
  EXPECT_EQ(client_->Get(ns->id, {"zz"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Lookup(std::string(32, '0'), keys).status().code(),
            absl::StatusCode::kNotFound);
  NamespaceOptions bad = Options();
  bad.layout.dtype = "int4";
  EXPECT_EQ(client_->OpenNamespace(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = Options();
  bad.cost_model = "llama-9";
  EXPECT_EQ(client_->OpenNamespace(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->RegisterMemory("/dev/shm/none-such", 10).status().code(),
            absl::StatusCode::kNotFound);
  // CUDA IPC: a malformed handle is refused before the daemon touches CUDA;
  // a well-formed one needs a GPU (none here: FAILED_PRECONDITION).
  const Client::CudaIpcTensor short_handle{"abc", 0, 4096};
  EXPECT_EQ(client_->RegisterCudaIpc(0, {&short_handle, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  if (daemon_->gpus().devices.empty()) {
    const Client::CudaIpcTensor bogus{std::string(64, '\x01'), 0, 4096};
    EXPECT_EQ(client_->RegisterCudaIpc(0, {&bogus, 1}).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  ClientOptions quick;
  quick.timeout = absl::Milliseconds(300);
  auto nobody = Client::Connect("127.0.0.1:1", quick);
  ASSERT_TRUE(nobody.ok());
  const absl::StatusCode code = (*nobody)->Lookup(ns->id, keys).status().code();
  EXPECT_TRUE(code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded)
      << code;
}

TEST_F(ClientRpcTest, PutBlocksFromViewsInChunksCountsWhatWasNew) {
  absl::StatusOr<OpenedNamespace> ns = client_->OpenNamespace(Options());
  ASSERT_TRUE(ns.ok()) << ns.status();
  // Three blocks sliced out of one buffer, sent 1000 bytes per message.
  std::string file(2 * kBlock + 123, '\0');
  for (size_t i = 0; i < file.size(); ++i) file[i] = static_cast<char>(i * 7 + i / kBlock);
  const absl::string_view all(file);
  const std::vector<std::string> keys = {"p1", "p2", "p3"};
  const std::vector<absl::string_view> views = {all.substr(0, kBlock), all.substr(kBlock, kBlock),
                                                all.substr(2 * kBlock)};
  PutOptions small;
  small.chunk_bytes = 1000;
  absl::StatusOr<PutResult> put = client_->PutBlocks(ns->id, keys, views, small);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->blocks_stored, 3u);
  EXPECT_EQ(put->blocks_already_cached, 0u);
  put = client_->PutBlocks(ns->id, keys, views);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->blocks_stored, 0u);
  EXPECT_EQ(put->blocks_already_cached, 3u);
  // parent_key continues the chain: the fourth block extends p3.
  PutOptions child;
  child.parent_key = "p3";
  const std::vector<std::string> tail_key = {"p4"};
  const std::vector<absl::string_view> tail = {all.substr(0, 512)};
  put = client_->PutBlocks(ns->id, tail_key, tail, child);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->blocks_stored, 1u);
  const std::vector<std::string> chain = {"p1", "p2", "p3", "p4"};
  absl::StatusOr<LookupResult> hit = client_->Lookup(ns->id, chain);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ(hit->matched, 4u);

  small.chunk_bytes = 0;
  EXPECT_EQ(client_->PutBlocks(ns->id, keys, views, small).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->PutBlocks(ns->id, keys, tail).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientRpcTest, GetChunksStreamsEachBlockInOrderAndCancels) {
  absl::StatusOr<OpenedNamespace> ns = client_->OpenNamespace(Options());
  ASSERT_TRUE(ns.ok()) << ns.status();
  const std::vector<std::string> keys = {"g1", "g2"};
  const std::vector<std::string> data = {std::string(kBlock, 'x'), std::string(777, 'y')};
  ASSERT_TRUE(client_->Put(ns->id, keys, data).ok());

  std::vector<std::string> starts;  // keys of the chunks that start a block
  std::vector<uint64_t> sizes;
  std::vector<std::string> blocks;
  absl::Status s = client_->GetChunks(ns->id, keys, [&](const GetChunkView& c) {
    if (!c.key.empty()) {
      starts.emplace_back(c.key);
      sizes.push_back(c.block_bytes);
      blocks.emplace_back();
    }
    EXPECT_FALSE(blocks.empty());
    EXPECT_EQ(c.offset, blocks.back().size());
    blocks.back().append(c.data.data(), c.data.size());
    return true;
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(starts, keys);
  EXPECT_EQ(sizes, (std::vector<uint64_t>{kBlock, 777}));
  EXPECT_EQ(blocks, data);

  int calls = 0;
  s = client_->GetChunks(ns->id, keys, [&](const GetChunkView&) {
    ++calls;
    return false;
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_EQ(calls, 1);
  const std::vector<std::string> missing = {"zz"};
  EXPECT_EQ(client_->GetChunks(ns->id, missing, [](const GetChunkView&) { return true; }).code(),
            absl::StatusCode::kNotFound);
}

// A daemon that predates LookupRequest.packed_keys: it reads `keys` only,
// refuses a Lookup without them (INVALID_ARGUMENT, as kvtierd did), and
// matches every key it reads; or, with refuse_all, refuses every Lookup.
class OldDaemon final : public kvtier::v1::KvCache::Service {
 public:
  explicit OldDaemon(bool refuse_all = false) : refuse_all_(refuse_all) {}
  grpc::Status Lookup(grpc::ServerContext*, const kvtier::v1::LookupRequest* req,
                      kvtier::v1::LookupResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(*req);
    if (refuse_all_ || req->keys_size() == 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request has 0 keys; must be 1..8");
    }
    resp->set_matched(static_cast<uint32_t>(req->keys_size()));
    return grpc::Status::OK;
  }
  std::vector<kvtier::v1::LookupRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  const bool refuse_all_;
  std::mutex mu_;
  std::vector<kvtier::v1::LookupRequest> requests_;
};

// Serves `service` on a port of its own until destroyed.
class FakeDaemon {
 public:
  explicit FakeDaemon(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
  }
  ~FakeDaemon() {
    if (server_ != nullptr) server_->Shutdown();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  bool started() const { return server_ != nullptr; }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(ClientRpcTest, LookupSendsPackedKeysAndRepeatsThemToADaemonThatCannotReadThem) {
  absl::StatusOr<OpenedNamespace> ns = client_->OpenNamespace(Options());
  ASSERT_TRUE(ns.ok()) << ns.status();
  const std::vector<std::string> keys = {std::string(32, 'a'), std::string(32, 'b')};
  const std::vector<std::string> data = {std::string(kBlock, 'x'), std::string(kBlock, 'y')};
  ASSERT_TRUE(client_->Put(ns->id, keys, data).ok());
  absl::StatusOr<LookupResult> both = client_->Lookup(ns->id, keys);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->matched, 2u);

  // The daemon reads packed keys as it reads `keys`: on gRPC's thread, and
  // on the executor (more than 1024 keys).
  auto stub = kvtier::v1::KvCache::NewStub(
      grpc::CreateChannel(daemon_->listen_address(), grpc::InsecureChannelCredentials()));
  auto lookup = [&](const std::string& packed, uint32_t width, bool lease,
                    kvtier::v1::LookupResponse* resp) {
    kvtier::v1::LookupRequest req;
    req.set_namespace_id(ns->id);
    req.set_packed_keys(packed);
    req.set_packed_key_bytes(width);
    req.set_take_lease(lease);
    req.set_compact_reply(true);
    grpc::ClientContext ctx;
    return stub->Lookup(&ctx, req, resp);
  };
  std::string packed = keys[0] + keys[1];
  kvtier::v1::LookupResponse resp;
  ASSERT_TRUE(lookup(packed, 32, false, &resp).ok());
  EXPECT_EQ(resp.matched(), 2u);
  EXPECT_EQ(resp.compact_blocks().size_bytes_size(), 2);
  for (int i = 0; i < 1100; ++i)
    packed += absl::StrCat("missing-", i, std::string(32, '.')).substr(0, 32);
  resp.Clear();
  ASSERT_TRUE(lookup(packed, 32, false, &resp).ok());
  EXPECT_EQ(resp.matched(), 2u);
  // Malformed: refused, and no lease is taken. A torn length at the
  // right width, or too many keys, would otherwise match both blocks.
  const uint32_t leases = daemon_->cache().Snapshot().active_leases;
  const std::string torn = keys[0] + keys[1] + "z";
  std::string too_many = keys[0] + keys[1];
  too_many.resize(32 * (daemon_->cache().options().max_keys_per_request + 1ull), 'k');
  const std::pair<std::string, uint32_t> malformed[] = {
      {keys[0] + keys[1], 0}, {keys[0] + keys[1], 33}, {torn, 32}, {too_many, 32}};
  for (const auto& [bytes, width] : malformed) {
    EXPECT_EQ(lookup(bytes, width, true, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << bytes.size() << " bytes of width " << width;
  }
  EXPECT_EQ(daemon_->cache().Snapshot().active_leases, leases);
  ASSERT_TRUE(lookup(keys[0] + keys[1], 32, true, &resp).ok());
  EXPECT_EQ(daemon_->cache().Snapshot().active_leases, leases + 1);

  OldDaemon old;
  FakeDaemon fake(&old);
  ASSERT_TRUE(fake.started());
  auto client = Client::Connect(fake.address());
  ASSERT_TRUE(client.ok()) << client.status();
  // It refuses packed keys: the client asks again with `keys`...
  absl::StatusOr<LookupResult> hit = (*client)->Lookup(std::string(32, '0'), keys);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ(hit->matched, 2u);
  std::vector<kvtier::v1::LookupRequest> sent = old.requests();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].packed_keys(), keys[0] + keys[1]);
  EXPECT_EQ(sent[0].packed_key_bytes(), 32u);
  EXPECT_EQ(sent[0].keys_size(), 0);
  ASSERT_EQ(sent[1].keys_size(), 2);
  EXPECT_EQ(sent[1].keys(1), keys[1]);
  EXPECT_TRUE(sent[1].packed_keys().empty());
  // ...and sends `keys` for the next 1000 Lookups, then tries packed keys
  // again (a daemon upgraded at the same address would take them).
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE((*client)->Lookup(std::string(32, '0'), keys).ok());
  sent = old.requests();
  ASSERT_EQ(sent.size(), 1002u);
  for (size_t i = 2; i < sent.size(); ++i) {
    ASSERT_EQ(sent[i].keys_size(), 2) << i;
    ASSERT_TRUE(sent[i].packed_keys().empty()) << i;
  }
  ASSERT_TRUE((*client)->Lookup(std::string(32, '0'), keys).ok());
  sent = old.requests();
  ASSERT_EQ(sent.size(), 1004u);
  EXPECT_EQ(sent[1002].packed_key_bytes(), 32u);
  EXPECT_EQ(sent[1003].keys_size(), 2);

  // A request refused both ways is refused for its own fault: the caller
  // gets the error, and the next Lookup is packed again.
  OldDaemon refusing(/*refuse_all=*/true);
  FakeDaemon strict(&refusing);
  ASSERT_TRUE(strict.started());
  auto client2 = Client::Connect(strict.address());
  ASSERT_TRUE(client2.ok()) << client2.status();
  EXPECT_EQ((*client2)->Lookup(std::string(32, '0'), keys).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refusing.requests().size(), 2u);
  EXPECT_FALSE((*client2)->Lookup(std::string(32, '0'), keys).ok());
  ASSERT_EQ(refusing.requests().size(), 4u);
  EXPECT_EQ(refusing.requests()[2].packed_key_bytes(), 32u);
}
}  // namespace
}  // namespace kvtier::client
