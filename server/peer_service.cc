#include "server/peer_service.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/async/unary_call.h"
#include "server/grpc_auth.h"
#include "server/proto_convert.h"
#include "server/rpc_roles.h"
#include "spdlog/spdlog.h"

namespace kvtier {

void PeerBlockToProto(const PeerBlockInfo& block, v1::PeerBlock* out) {
  out->set_key(std::string(block.key.bytes()));
  out->set_parent(std::string(block.parent.bytes()));
  out->set_size_bytes(block.size);
  out->set_checksum(block.checksum);
  out->set_address(block.address);
  out->set_already_cached(block.already_cached);
}

absl::StatusOr<PeerBlockInfo> PeerBlockFromProto(const v1::PeerBlock& block, const char* field) {
  PeerBlockInfo out;
  absl::StatusOr<BlockKey> key = BlockKey::Create(block.key());
  if (!key.ok())
    return absl::InvalidArgumentError(absl::StrCat(field, ".key: ", key.status().message()));
  ASSIGN_OR_RETURN(BlockKey parent,
                   OptionalKeyFromProto(block.parent(), absl::StrCat(field, ".parent").c_str()));
  out.key = *key;
  out.parent = parent;
  out.size = block.size_bytes();
  out.checksum = block.checksum();
  out.address = block.address();
  out.already_cached = block.already_cached();
  return out;
}

void StatusesToCompletions(const std::vector<absl::Status>& statuses,
                           absl::Span<const BlockKey> keys, absl::Span<const uint64_t> sizes,
                           google::protobuf::RepeatedPtrField<v1::BlockCompletion>* out) {
  for (size_t i = 0; i < statuses.size(); ++i) {
    v1::BlockCompletion* c = out->Add();
    c->set_index(static_cast<uint32_t>(i));
    if (i < keys.size()) c->set_key(std::string(keys[i].bytes()));
    c->set_code(static_cast<int32_t>(statuses[i].code()));
    c->set_message(std::string(statuses[i].message()));
    if (i < sizes.size()) c->set_size_bytes(sizes[i]);
  }
}

absl::Status CompletionToStatus(const v1::BlockCompletion& completion) {
  const int code = completion.code();
  if (code < 0 || code > 16) {
    return absl::InternalError(absl::StrCat("peer sent an invalid status code ", code));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), completion.message());
}

PeerService::PeerService(Deps deps)
    : deps_(deps),
      limits_("Peer", {"Hello", "Stage", "Commit", "Export", "ReleaseExport"},
              deps_.max_calls_per_method) {
  if (deps_.executor == nullptr) {
    spdlog::critical("PeerService needs a CallExecutor");
    std::abort();
  }
}

#define KVTIER_UNARY(Method) KVTIER_UNARY_ON_EXECUTOR(PeerService, Method, *deps_.executor, limits_)
KVTIER_UNARY(Hello)
KVTIER_UNARY(Stage)
KVTIER_UNARY(Commit)
KVTIER_UNARY(Export)
KVTIER_UNARY(ReleaseExport)
#undef KVTIER_UNARY

grpc::Status PeerService::DoHello(Ctx* context, const v1::HelloRequest* request,
                                  v1::HelloResponse* response) {
  if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Peer", "Hello")); !s.ok()) return s;
  absl::StatusOr<PeerHello> hello = deps_.transfer->Hello(request->daemon_id());
  if (!hello.ok()) return ToGrpc(hello.status());
  response->set_daemon_id(hello->daemon_id);
  response->set_role(hello->role);
  response->set_transport_address(hello->transport_address);
  response->set_memory_base(hello->memory.base);
  response->set_memory_size(hello->memory.size);
  response->set_remote_key(hello->memory.remote_key);
  response->set_transport(hello->transport);
  response->set_transports(hello->transports);
  response->set_net_devices(hello->net_devices);
  return grpc::Status::OK;
}

grpc::Status PeerService::DoStage(Ctx* context, const v1::StageRequest* request,
                                  v1::StageResponse* response) {
  if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Peer", "Stage")); !s.ok()) return s;
  absl::StatusOr<NamespaceId> ns = NamespaceIdFromProto(request->namespace_id());
  if (!ns.ok()) return ToGrpc(ns.status());
  std::vector<PeerBlockInfo> blocks;
  blocks.reserve(request->blocks_size());
  for (int i = 0; i < request->blocks_size(); ++i) {
    absl::StatusOr<PeerBlockInfo> b =
        PeerBlockFromProto(request->blocks(i), absl::StrCat("blocks[", i, "]").c_str());
    if (!b.ok()) return ToGrpc(b.status());
    blocks.push_back(*std::move(b));
  }
  absl::StatusOr<StageResult> staged =
      deps_.transfer->Stage(*ns, std::move(blocks), absl::Milliseconds(request->ttl_ms()));
  if (!staged.ok()) return ToGrpc(staged.status());
  response->set_daemon_id(staged->daemon_id);
  response->set_stage_id(staged->stage_id);
  for (const PeerBlockInfo& b : staged->blocks) PeerBlockToProto(b, response->add_blocks());
  response->set_refused_code(static_cast<int32_t>(staged->refused.code()));
  response->set_refused_message(std::string(staged->refused.message()));
  return grpc::Status::OK;
}

grpc::Status PeerService::DoCommit(Ctx* context, const v1::CommitRequest* request,
                                   v1::CommitResponse* response) {
  if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Peer", "Commit")); !s.ok())
    return s;
  absl::StatusOr<std::vector<absl::Status>> done =
      deps_.transfer->Commit(request->stage_id(), request->received());
  if (!done.ok()) return ToGrpc(done.status());
  StatusesToCompletions(*done, {}, {}, response->mutable_blocks());
  return grpc::Status::OK;
}

grpc::Status PeerService::DoExport(Ctx* context, const v1::ExportRequest* request,
                                   v1::ExportResponse* response) {
  if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Peer", "Export")); !s.ok())
    return s;
  absl::StatusOr<NamespaceKeys> nk =
      NamespaceKeysFromProto(request->namespace_id(), request->keys());
  if (!nk.ok()) return ToGrpc(nk.status());
  absl::StatusOr<ExportResult> exported =
      deps_.transfer->Export(nk->ns, nk->keys, absl::Milliseconds(request->ttl_ms()));
  if (!exported.ok()) return ToGrpc(exported.status());
  response->set_daemon_id(exported->daemon_id);
  response->set_export_id(exported->export_id);
  for (const PeerBlockInfo& b : exported->blocks) PeerBlockToProto(b, response->add_blocks());
  return grpc::Status::OK;
}

grpc::Status PeerService::DoReleaseExport(Ctx* context, const v1::ReleaseExportRequest* request,
                                          v1::ReleaseExportResponse*) {
  if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Peer", "ReleaseExport")); !s.ok())
    return s;
  return ToGrpc(deps_.transfer->ReleaseExport(request->export_id()));
}

}  // namespace kvtier
