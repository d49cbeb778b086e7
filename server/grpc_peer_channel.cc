#include "server/grpc_peer_channel.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/grpc_status.h"
#include "client/cpp/channel.h"
#include "kvtier/v1/peer.grpc.pb.h"
#include "server/peer_service.h"

namespace kvtier {
namespace {

class GrpcPeerChannel final : public PeerChannel {
 public:
  GrpcPeerChannel(const std::string& target, const Credentials& credentials) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = OpenChannel(target, credentials);
    if (channel.ok()) {
      stub_ = v1::Peer::NewStub(*channel);
    } else {
      broken_ = absl::FailedPreconditionError(
          absl::StrCat("cannot open a channel to peer ", target, ": ", channel.status().message()));
    }
  }

  absl::StatusOr<PeerHello> Hello(const std::string& caller_id, absl::Time deadline) override {
    if (stub_ == nullptr) return broken_;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    v1::HelloRequest req;
    req.set_daemon_id(caller_id);
    v1::HelloResponse resp;
    if (grpc::Status s = stub_->Hello(&ctx, req, &resp); !s.ok()) return FromGrpc(s);
    PeerHello h;
    h.daemon_id = resp.daemon_id();
    h.role = resp.role();
    h.transport_address = resp.transport_address();
    h.memory = {resp.memory_base(), resp.memory_size(), resp.remote_key()};
    h.transport = resp.transport();
    h.transports = resp.transports();
    h.net_devices = resp.net_devices();
    return h;
  }

  absl::StatusOr<StageResult> Stage(const NamespaceId& ns, absl::Span<const PeerBlockInfo> blocks,
                                    absl::Duration ttl, absl::Time deadline) override {
    if (stub_ == nullptr) return broken_;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    v1::StageRequest req;
    req.set_namespace_id(ns.ToHex());
    for (const PeerBlockInfo& b : blocks) PeerBlockToProto(b, req.add_blocks());
    req.set_ttl_ms(
        static_cast<uint32_t>(std::min<int64_t>(absl::ToInt64Milliseconds(ttl), UINT32_MAX)));
    v1::StageResponse resp;
    if (grpc::Status s = stub_->Stage(&ctx, req, &resp); !s.ok()) return FromGrpc(s);
    StageResult r;
    r.daemon_id = resp.daemon_id();
    r.stage_id = resp.stage_id();
    for (int i = 0; i < resp.blocks_size(); ++i) {
      absl::StatusOr<PeerBlockInfo> b =
          PeerBlockFromProto(resp.blocks(i), absl::StrCat("blocks[", i, "]").c_str());
      if (!b.ok())
        return absl::InternalError(absl::StrCat("peer's Stage answer: ", b.status().message()));
      r.blocks.push_back(*std::move(b));
    }
    v1::BlockCompletion refused;
    refused.set_code(resp.refused_code());
    refused.set_message(resp.refused_message());
    r.refused = CompletionToStatus(refused);
    return r;
  }

  absl::StatusOr<std::vector<absl::Status>> Commit(const std::string& stage_id, uint32_t received,
                                                   absl::Time deadline) override {
    if (stub_ == nullptr) return broken_;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    v1::CommitRequest req;
    req.set_stage_id(stage_id);
    req.set_received(received);
    v1::CommitResponse resp;
    if (grpc::Status s = stub_->Commit(&ctx, req, &resp); !s.ok()) return FromGrpc(s);
    std::vector<absl::Status> out;
    for (const v1::BlockCompletion& c : resp.blocks()) out.push_back(CompletionToStatus(c));
    return out;
  }

  absl::StatusOr<ExportResult> Export(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                                      absl::Duration ttl, absl::Time deadline) override {
    if (stub_ == nullptr) return broken_;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    v1::ExportRequest req;
    req.set_namespace_id(ns.ToHex());
    for (const BlockKey& k : keys) req.add_keys(std::string(k.bytes()));
    req.set_ttl_ms(
        static_cast<uint32_t>(std::min<int64_t>(absl::ToInt64Milliseconds(ttl), UINT32_MAX)));
    v1::ExportResponse resp;
    if (grpc::Status s = stub_->Export(&ctx, req, &resp); !s.ok()) return FromGrpc(s);
    ExportResult r;
    r.daemon_id = resp.daemon_id();
    r.export_id = resp.export_id();
    for (int i = 0; i < resp.blocks_size(); ++i) {
      absl::StatusOr<PeerBlockInfo> b =
          PeerBlockFromProto(resp.blocks(i), absl::StrCat("blocks[", i, "]").c_str());
      if (!b.ok())
        return absl::InternalError(absl::StrCat("peer's Export answer: ", b.status().message()));
      r.blocks.push_back(*std::move(b));
    }
    return r;
  }

  absl::Status ReleaseExport(const std::string& export_id, absl::Time deadline) override {
    if (stub_ == nullptr) return broken_;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    v1::ReleaseExportRequest req;
    req.set_export_id(export_id);
    v1::ReleaseExportResponse resp;
    return FromGrpc(stub_->ReleaseExport(&ctx, req, &resp));
  }

 private:
  std::unique_ptr<v1::Peer::Stub> stub_;  // null when the channel could not be opened
  absl::Status broken_;                   // why
};

}  // namespace

PeerChannelFactory GrpcPeerChannels(Credentials credentials) {
  return [credentials = std::move(credentials)](const std::string& target) {
    return std::unique_ptr<PeerChannel>(std::make_unique<GrpcPeerChannel>(target, credentials));
  };
}

}  // namespace kvtier
