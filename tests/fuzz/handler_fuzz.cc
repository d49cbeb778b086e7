// libFuzzer target: the daemon's request handlers. One in-process kvtierd
// (KvCache, Admin and Peer services; a loopback peer transport so Transfer,
// Stage and Export run their whole path) takes requests whose protobuf bytes
// come from the fuzzer, through a real gRPC channel so that decoding is the
// server's own.
//
// Input: byte 0 picks the RPC; the rest is the request message (for Put, a
// sequence of 2-byte-length-prefixed PutChunk messages). Transfer's peer is
// always this daemon (no connection leaves the process).
//
// Properties checked after every input, besides no crash or sanitizer
// report: no cached block is stranded and no block ever failed its checksum
// (nothing corrupts bytes here, so any mismatch means a handler wrote where
// it must not).
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "kvtier/v1/admin.grpc.pb.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "kvtier/v1/peer.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"
#include "spdlog/spdlog.h"
#include "testing/loopback_transport.h"

namespace {

using namespace kvtier;  // NOLINT(build/namespaces): a fuzz target's file scope

struct Harness {
  std::unique_ptr<Daemon> daemon;
  std::unique_ptr<v1::KvCache::Stub> kv;
  std::unique_ptr<v1::Admin::Stub> admin;
  std::unique_ptr<v1::Peer::Stub> peer;
};

Harness* Start() {
  spdlog::set_level(spdlog::level::off);
  auto* h = new Harness();
  DaemonConfig c = DefaultConfig(uint64_t{4} << 30);
  c.listen = "127.0.0.1:0";
  c.metrics_listen = "off";
  c.host_tier_bytes = uint64_t{32} << 20;
  c.host_slab_bytes = uint64_t{1} << 20;
  c.max_block_bytes = uint64_t{1} << 20;
  c.max_message_bytes = uint64_t{4} << 20;
  c.max_leases = 256;
  c.max_regions = 8;
  c.max_namespaces = 64;
  c.nvme_dirs = "";
  c.gpu_tier = "off";
  c.costmodel_probe_tiers = false;
  c.costmodel_gpu = "h100-sxm";
  c.log_level = "off";
  c.peer_timeout_ms = 2000;
  c.peer_max_pending = 16;  // stages hold slots: keep room for Puts
  char dir[] = "/tmp/kvtier-handler-fuzz-XXXXXX";
  if (mkdtemp(dir) == nullptr) std::abort();
  c.shm_dir = dir;
  DaemonSeams seams;
  seams.transport = std::make_unique<LoopbackTransport>();
  absl::StatusOr<std::unique_ptr<Daemon>> d = Daemon::Start(c, std::move(seams));
  if (!d.ok()) {
    std::fprintf(stderr, "daemon did not start: %s\n", d.status().ToString().c_str());
    std::abort();
  }
  h->daemon = *std::move(d);
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(8 << 20);
  args.SetMaxReceiveMessageSize(8 << 20);
  auto channel = grpc::CreateCustomChannel(h->daemon->listen_address(),
                                           grpc::InsecureChannelCredentials(), args);
  h->kv = v1::KvCache::NewStub(channel);
  h->admin = v1::Admin::NewStub(channel);
  h->peer = v1::Peer::NewStub(channel);
  // The namespace and blocks the seed corpus refers to
  // (tests/fuzz/make_handler_corpus.py): "fuzz", 1 layer, 1 KV head of 128,
  // bf16, 16 tokens per block (8 KiB), keys k0 -> k1 -> k2 -> k3.
  v1::OpenNamespaceRequest open;
  open.set_model_id("fuzz");
  v1::NamespaceLayout* l = open.mutable_layout();
  l->set_num_layers(1);
  l->set_num_kv_heads(1);
  l->set_head_dim(128);
  l->set_dtype(v1::DTYPE_BF16);
  l->set_tokens_per_block(16);
  l->set_tp_size(1);
  v1::OpenNamespaceResponse opened;
  grpc::ClientContext ctx;
  if (!h->kv->OpenNamespace(&ctx, open, &opened).ok()) std::abort();
  grpc::ClientContext put_ctx;
  v1::PutResponse put;
  auto writer = h->kv->Put(&put_ctx, &put);
  for (int i = 0; i < 4; ++i) {
    v1::PutChunk c;
    if (i == 0) c.set_namespace_id(opened.namespace_id());
    c.set_key("k" + std::to_string(i));
    if (i > 0) c.set_parent_key("k" + std::to_string(i - 1));
    c.set_block_bytes(8192);
    c.set_data(std::string(8192, static_cast<char>('a' + i)));
    writer->Write(c);
  }
  writer->WritesDone();
  if (!writer->Finish().ok()) std::abort();
  return h;
}

void Prepare(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
}

template <typename Request>
bool Parse(const uint8_t* data, size_t size, Request* out) {
  return out->ParseFromArray(data, static_cast<int>(size));
}

template <typename Request, typename Response, typename Stub, typename Rpc>
void Unary(Stub& stub, Rpc rpc, const uint8_t* data, size_t size) {
  Request req;
  if (!Parse(data, size, &req)) return;
  Response resp;
  grpc::ClientContext ctx;
  Prepare(&ctx);
  (void)(stub.*rpc)(&ctx, req, &resp);
}

template <typename Request, typename Item, typename Rpc>
void ServerStream(v1::KvCache::Stub& stub, Rpc rpc, const uint8_t* data, size_t size) {
  Request req;
  if (!Parse(data, size, &req)) return;
  grpc::ClientContext ctx;
  Prepare(&ctx);
  auto reader = (stub.*rpc)(&ctx, req);
  Item item;
  while (reader->Read(&item)) {
  }
  (void)reader->Finish();
}

void Put(v1::KvCache::Stub& stub, const uint8_t* data, size_t size) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::PutResponse resp;
  auto writer = stub.Put(&ctx, &resp);
  while (size >= 2) {
    const size_t n = std::min<size_t>(size - 2, data[0] | (size_t{data[1]} << 8));
    v1::PutChunk chunk;
    if (!chunk.ParseFromArray(data + 2, static_cast<int>(n)) || !writer->Write(chunk)) break;
    data += 2 + n;
    size -= 2 + n;
  }
  writer->WritesDone();
  (void)writer->Finish();
}

void Check(Harness& h) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::GetStatusResponse st;
  grpc::Status s = h.admin->GetStatus(&ctx, v1::GetStatusRequest(), &st);
  if (!s.ok()) {
    std::fprintf(stderr, "GetStatus failed: %s\n", s.error_message().c_str());
    std::abort();
  }
  if (st.stranded_blocks() != 0 || st.counters().checksum_mismatches() != 0) {
    std::fprintf(stderr, "invariant broken: %llu stranded blocks, %llu checksum mismatches\n",
                 static_cast<unsigned long long>(st.stranded_blocks()),
                 static_cast<unsigned long long>(st.counters().checksum_mismatches()));
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness* h = Start();
  if (size == 0) return 0;
  const uint8_t op = data[0];
  ++data;
  --size;
  v1::KvCache::Stub& kv = *h->kv;
  switch (op % 17) {
    case 0:
      Unary<v1::OpenNamespaceRequest, v1::OpenNamespaceResponse>(
          kv, &v1::KvCache::Stub::OpenNamespace, data, size);
      break;
    case 1:
      Unary<v1::LookupRequest, v1::LookupResponse>(kv, &v1::KvCache::Stub::Lookup, data, size);
      break;
    case 2:
      Unary<v1::ReleaseRequest, v1::ReleaseResponse>(kv, &v1::KvCache::Stub::Release, data, size);
      break;
    case 3:
      Unary<v1::DeleteRequest, v1::DeleteResponse>(kv, &v1::KvCache::Stub::Delete, data, size);
      break;
    case 4:
      Unary<v1::RegisterMemoryRequest, v1::RegisterMemoryResponse>(
          kv, &v1::KvCache::Stub::RegisterMemory, data, size);
      break;
    case 5:
      Unary<v1::UnregisterMemoryRequest, v1::UnregisterMemoryResponse>(
          kv, &v1::KvCache::Stub::UnregisterMemory, data, size);
      break;
    case 6: {
      v1::TransferRequest req;
      if (!Parse(data, size, &req)) break;
      req.set_peer(h->daemon->listen_address());
      if (req.timeout_ms() > 2000) req.set_timeout_ms(2000);
      v1::TransferResponse resp;
      grpc::ClientContext ctx;
      Prepare(&ctx);
      (void)kv.Transfer(&ctx, req, &resp);
      break;
    }
    case 7:
      ServerStream<v1::GetRequest, v1::GetChunk>(kv, &v1::KvCache::Stub::Get, data, size);
      break;
    case 8:
      ServerStream<v1::SaveRequest, v1::BlockCompletion>(kv, &v1::KvCache::Stub::Save, data, size);
      break;
    case 9:
      ServerStream<v1::LoadRequest, v1::BlockCompletion>(kv, &v1::KvCache::Stub::Load, data, size);
      break;
    case 10:
      Unary<v1::HelloRequest, v1::HelloResponse>(*h->peer, &v1::Peer::Stub::Hello, data, size);
      break;
    case 11:
      Unary<v1::StageRequest, v1::StageResponse>(*h->peer, &v1::Peer::Stub::Stage, data, size);
      break;
    case 12:
      Unary<v1::CommitRequest, v1::CommitResponse>(*h->peer, &v1::Peer::Stub::Commit, data, size);
      break;
    case 13:
      Unary<v1::ExportRequest, v1::ExportResponse>(*h->peer, &v1::Peer::Stub::Export, data, size);
      break;
    case 14:
      Unary<v1::ReleaseExportRequest, v1::ReleaseExportResponse>(
          *h->peer, &v1::Peer::Stub::ReleaseExport, data, size);
      break;
    case 15:
      Unary<v1::ListNamespacesRequest, v1::ListNamespacesResponse>(
          *h->admin, &v1::Admin::Stub::ListNamespaces, data, size);
      Unary<v1::ListPeersRequest, v1::ListPeersResponse>(*h->admin, &v1::Admin::Stub::ListPeers,
                                                         data, size);
      break;
    default:
      Put(kv, data, size);
      break;
  }
  Check(*h);
  return 0;
}
