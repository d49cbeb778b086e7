#include "server/kvcache_service.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "datapath/region_copy.h"
#include "datapath/shared_memory_region.h"
#include "server/grpc_auth.h"
#include "server/peer_service.h"
#include "server/proto_convert.h"
#include "server/put_assembly.h"
#include "server/rpc_roles.h"
#include "spdlog/spdlog.h"

namespace kvtier {
namespace {

grpc::Status Finish(const char* rpc, const absl::Status& status) {
  if (!status.ok()) spdlog::debug("{}: {}", rpc, status.ToString());
  return ToGrpc(status);
}

// Leaves the handler with the refusal when the caller may not call `rpc`
// (a string literal: the role it needs comes from server/rpc_roles.h).
#define KVTIER_ADMIT(rpc, who)                                                         \
  absl::StatusOr<Identity> who = Admit(*deps_.auth, *context, RoleOf("KvCache", rpc)); \
  if (!who.ok()) return Finish(rpc, who.status())

}  // namespace

KvCacheService::KvCacheService(Deps deps)
    : deps_(std::move(deps)),
      region_registration_(RegionRegistration::Options{
          .shm_dir = deps_.regions->shm_dir(),
          // With authentication, each tenant's files live in a directory of
          // its own, shm_dir/TENANT (one the operator mounts into that
          // tenant's engine containers only).
          .per_tenant_dirs = deps_.auth->enabled(),
          .copy_engine = deps_.copy_engine,
          .open_cuda_ipc = deps_.open_cuda_ipc,
      }) {}

grpc::Status KvCacheService::OpenNamespace(grpc::ServerContext* context,
                                           const v1::OpenNamespaceRequest* request,
                                           v1::OpenNamespaceResponse* response) {
  KVTIER_ADMIT("OpenNamespace", who);
  absl::StatusOr<NamespaceSpec> spec = NamespaceSpecFromProto(*request);
  if (!spec.ok()) return Finish("OpenNamespace", spec.status());
  // The tenant comes from the authenticated caller, never from the request.
  spec->tenant = who->tenant;
  // Resolve the model before opening, so a bad model changes nothing.
  absl::StatusOr<std::optional<PreparedModel>> model =
      deps_.planner->Prepare(*spec, request->cost_model(), request->model_config_json());
  if (!model.ok()) return Finish("OpenNamespace", model.status());
  absl::StatusOr<std::shared_ptr<BlockTransform>> transform = TransformFor(*spec);
  if (!transform.ok()) return Finish("OpenNamespace", transform.status());
  std::shared_ptr<BlockTransform> t = *std::move(transform);
  if (t != nullptr && t->stored_bytes() > t->plain_bytes()) {
    return Finish("OpenNamespace", absl::InvalidArgumentError(absl::StrCat(
                                       "encoding: ", t->Describe(), " would store ",
                                       t->stored_bytes(), " bytes per ", t->plain_bytes(),
                                       "-byte block; use a larger k_group_tokens")));
  }
  // The transform is known before the namespace opens, so no Get or Load
  // can see its stored blocks undecoded (a re-opened namespace may already
  // hold blocks recovered from NVMe). Serialized with CloseNamespace, which
  // forgets it.
  MutexLock open_close(&open_close_mu_);
  if (t != nullptr) t = deps_.transforms->Set(NamespaceId::Of(*spec), std::move(t));
  absl::StatusOr<OpenNamespaceResult> r = deps_.cache->OpenNamespace(*spec);
  if (!r.ok()) return Finish("OpenNamespace", r.status());
  const NamespacePlanning planning = deps_.planner->Attach(r->id, *spec, *std::move(model));
  response->set_stored_block_bytes(t != nullptr ? t->stored_bytes() : r->block_bytes);
  if (t != nullptr) response->set_encoding(t->Describe());
  response->set_namespace_id(r->id.ToHex());
  response->set_block_bytes(r->block_bytes);
  response->set_created(r->created);
  response->set_plans_enabled(planning.plans_enabled);
  response->set_plans_note(planning.note);
  response->set_nvme_admitted(planning.nvme_admitted);
  for (size_t g = 0; g < r->group_block_bytes.size(); ++g) {
    v1::GroupInfo* info = response->add_groups();
    info->set_kind(static_cast<v1::LayerGroup::Kind>(spec->groups[g].kind));
    info->set_block_bytes(r->group_block_bytes[g]);
  }
  return grpc::Status::OK;
}

grpc::Status KvCacheService::Lookup(grpc::ServerContext* context, const v1::LookupRequest* request,
                                    v1::LookupResponse* response) {
  KVTIER_ADMIT("Lookup", who);
  absl::StatusOr<NamespaceKeys> req =
      NamespaceKeysFromProto(request->namespace_id(), request->keys());
  if (!req.ok()) return Finish("Lookup", req.status());
  if (absl::Status s = deps_.cache->CheckTenant(req->ns, who->tenant); !s.ok()) {
    return Finish("Lookup", s);
  }
  absl::StatusOr<std::optional<uint8_t>> retention =
      RetentionFromProto(request->has_retention_priority(), request->retention_priority());
  if (!retention.ok()) return Finish("Lookup", retention.status());
  if (retention->has_value() && deps_.cache->IsHybrid(req->ns)) {
    return Finish("Lookup", absl::UnimplementedError(
                                "retention_priority on a Lookup of a namespace with layer groups "
                                "is not supported yet; give it with Save or Put"));
  }
  // A hybrid with a model is planned inside its Lookup, among its
  // restorable cuts.
  std::unique_ptr<HybridCutPlanner> hybrid_plan =
      deps_.planner->PlanHybrid(req->ns, request->prompt_tokens());
  absl::StatusOr<LookupResult> r =
      deps_.cache->Lookup(req->ns, req->keys, request->take_lease(),
                          absl::Milliseconds(request->lease_ttl_ms()), hybrid_plan.get());
  if (!r.ok()) return Finish("Lookup", r.status());
  if (retention->has_value() && r->matched > 0) {
    // After the Lookup (its lease, if any, is the caller's now): a failure
    // here (the namespace closed meanwhile) loses only the hint.
    absl::StatusOr<size_t> set = deps_.cache->SetRetention(
        req->ns, absl::MakeConstSpan(req->keys).subspan(0, r->matched), **retention);
    if (!set.ok())
      spdlog::warn("Lookup retention_priority not applied: {}", set.status().ToString());
  }
  response->set_matched(r->matched);
  auto add_info = [](const MatchedBlock& b, v1::BlockInfo* info) {
    info->set_key(std::string(b.key.bytes()));
    info->set_size_bytes(b.size);
    info->set_tier(b.on_host ? v1::TIER_KIND_HOST : v1::TIER_KIND_NVME);
    info->set_persisted(b.persisted);
  };
  auto add_loads = [&](const std::vector<GroupLoad>& loads,
                       google::protobuf::RepeatedPtrField<v1::GroupLoad>* out) {
    for (const GroupLoad& load : loads) {
      v1::GroupLoad* g = out->Add();
      g->set_group(load.group);
      g->set_first_key(load.first_key);
      for (const MatchedBlock& b : load.blocks) add_info(b, g->add_blocks());
    }
  };
  for (const MatchedBlock& b : r->blocks) add_info(b, response->add_blocks());
  add_loads(r->groups, response->mutable_groups());
  std::optional<costmodel::CutPlan> plan;
  if (hybrid_plan != nullptr && hybrid_plan->plan().has_value()) {
    deps_.planner->Record(*hybrid_plan, r->matched);
    plan = hybrid_plan->plan();
  } else {
    // Nothing matched of a hybrid (its plan: recompute), or no groups.
    plan = deps_.planner->Plan(req->ns, r->blocks, request->prompt_tokens());
  }
  if (plan.has_value()) {
    v1::FetchPlan* p = response->mutable_plan();
    p->set_fetch_blocks(plan->cut_blocks);
    p->set_fetch_seconds(plan->fetch_seconds);
    p->set_recompute_seconds(plan->recompute_seconds);
    p->set_total_seconds(plan->total_seconds);
    p->set_fetch_all_seconds(plan->fetch_all_seconds);
    p->set_recompute_all_seconds(plan->recompute_all_seconds);
    p->set_prompt_tokens(static_cast<uint32_t>(plan->tokens));
    add_loads(r->chosen_groups, p->mutable_groups());
  }
  if (!r->lease_id.empty()) {
    response->set_lease_id(r->lease_id);
    response->set_lease_expires_unix_ms(static_cast<uint64_t>(absl::ToUnixMillis(r->lease_expiry)));
  }
  return grpc::Status::OK;
}

absl::Status KvCacheService::DoPut(grpc::ServerContext* context, const Identity& who,
                                   grpc::ServerReader<v1::PutChunk>* reader,
                                   v1::PutResponse* response) {
  PutAssembly put(deps_.cache, deps_.transforms, who.tenant);
  v1::PutChunk chunk;
  const std::unique_ptr<StreamIdleReaper::Watch> watch = WatchIdle(context);
  while (reader->Read(&chunk)) {
    watch->Touch();
    ASSIGN_OR_RETURN(
        std::optional<uint8_t> retention,
        RetentionFromProto(chunk.has_retention_priority(), chunk.retention_priority()));
    if (absl::Status s = put.Add({chunk.namespace_id(), chunk.key(), chunk.parent_key(),
                                  chunk.block_bytes(), chunk.data(), chunk.group(), retention});
        !s.ok()) {
      return s;
    }
  }
  // Read() also returns false when the call was cancelled (client gone,
  // deadline, shutdown): only a cleanly finished stream commits.
  if (context->IsCancelled()) return absl::CancelledError("Put cancelled before it finished");
  ASSIGN_OR_RETURN(PutResult r, put.Commit());
  response->set_blocks_stored(r.blocks_stored);
  response->set_blocks_already_cached(r.blocks_already_cached);
  response->set_bytes_stored(r.bytes_stored);
  response->set_blocks_unusable(r.blocks_unusable);
  return absl::OkStatus();
}

grpc::Status KvCacheService::Put(grpc::ServerContext* context,
                                 grpc::ServerReader<v1::PutChunk>* reader,
                                 v1::PutResponse* response) {
  KVTIER_ADMIT("Put", who);
  return Finish("Put", DoPut(context, *who, reader, response));
}

grpc::Status KvCacheService::Get(grpc::ServerContext* context, const v1::GetRequest* request,
                                 grpc::ServerWriter<v1::GetChunk>* writer) {
  KVTIER_ADMIT("Get", who);
  absl::StatusOr<NamespaceKeys> req =
      NamespaceKeysFromProto(request->namespace_id(), request->keys());
  if (!req.ok()) return Finish("Get", req.status());
  if (absl::Status s = deps_.cache->CheckTenant(req->ns, who->tenant); !s.ok())
    return Finish("Get", s);
  const uint64_t chunk_bytes =
      request->max_chunk_bytes() == 0
          ? deps_.get_chunk_bytes
          : std::min<uint64_t>(request->max_chunk_bytes(), deps_.max_chunk_bytes);
  absl::StatusOr<std::vector<BlockCache::ReadHandle>> handles =
      deps_.cache->Read(req->ns, req->keys, /*verify=*/true, request->group());
  if (!handles.ok()) return Finish("Get", handles.status());
  const std::shared_ptr<BlockTransform> transform = deps_.transforms->Find(req->ns);
  std::vector<uint8_t> decoded(transform != nullptr ? transform->plain_bytes() : 0);
  v1::GetChunk chunk;
  const std::unique_ptr<StreamIdleReaper::Watch> watch = WatchIdle(context);
  for (const BlockCache::ReadHandle& h : *handles) {
    absl::Span<const uint8_t> bytes = h.bytes();
    if (transform != nullptr) {
      // Verified by Read; a block that does not decode is not served.
      if (absl::Status s = transform->Decode(bytes, absl::MakeSpan(decoded)); !s.ok()) {
        return Finish(
            "Get", absl::DataLossError(absl::StrCat("block ", h.key().ToHex(), ": ", s.message())));
      }
      bytes = decoded;
    }
    uint64_t offset = 0;
    do {
      const uint64_t n = std::min<uint64_t>(chunk_bytes, bytes.size() - offset);
      chunk.Clear();
      if (offset == 0) {
        chunk.set_key(std::string(h.key().bytes()));
        chunk.set_block_bytes(bytes.size());
      }
      chunk.set_offset(offset);
      chunk.set_data(bytes.data() + offset, n);
      if (!writer->Write(chunk)) {
        return Finish("Get", absl::CancelledError("client went away during Get"));
      }
      watch->Touch();
      offset += n;
    } while (offset < bytes.size());
  }
  return grpc::Status::OK;
}

grpc::Status KvCacheService::Release(grpc::ServerContext* context,
                                     const v1::ReleaseRequest* request,
                                     v1::ReleaseResponse* response) {
  KVTIER_ADMIT("Release", who);
  if (request->lease_id().empty()) {
    return Finish("Release", absl::InvalidArgumentError("lease_id is required"));
  }
  absl::StatusOr<uint32_t> n = deps_.cache->Release(request->lease_id(), who->tenant);
  if (!n.ok()) return Finish("Release", n.status());
  response->set_blocks_released(*n);
  return grpc::Status::OK;
}

grpc::Status KvCacheService::Delete(grpc::ServerContext* context, const v1::DeleteRequest* request,
                                    v1::DeleteResponse* response) {
  KVTIER_ADMIT("Delete", who);
  absl::StatusOr<NamespaceKeys> req =
      NamespaceKeysFromProto(request->namespace_id(), request->keys());
  if (!req.ok()) return Finish("Delete", req.status());
  if (absl::Status s = deps_.cache->CheckTenant(req->ns, who->tenant); !s.ok()) {
    return Finish("Delete", s);
  }
  absl::StatusOr<DeleteResult> r = deps_.cache->Delete(req->ns, req->keys, request->recursive());
  if (!r.ok()) return Finish("Delete", r.status());
  response->set_blocks_deleted(r->blocks_deleted);
  response->set_bytes_freed(r->bytes_freed);
  return grpc::Status::OK;
}

grpc::Status KvCacheService::CloseNamespace(grpc::ServerContext* context,
                                            const v1::CloseNamespaceRequest* request,
                                            v1::CloseNamespaceResponse* response) {
  KVTIER_ADMIT("CloseNamespace", who);
  absl::StatusOr<NamespaceId> ns = NamespaceIdFromProto(request->namespace_id());
  if (!ns.ok()) return Finish("CloseNamespace", ns.status());
  if (absl::Status s = deps_.cache->CheckTenant(*ns, who->tenant); !s.ok()) {
    return Finish("CloseNamespace", s);
  }
  // Serialized with OpenNamespace: a re-open sets the transform again
  // before the namespace serves, so its blocks are never seen undecoded,
  // and what a closed namespace leaves here is forgotten (namespaces opened
  // and closed over time do not accumulate).
  MutexLock open_close(&open_close_mu_);
  absl::StatusOr<CloseResult> r = deps_.cache->CloseNamespace(*ns, request->drop_blocks());
  if (!r.ok()) return Finish("CloseNamespace", r.status());
  deps_.planner->Detach(*ns);
  deps_.transforms->Remove(*ns);
  response->set_leases_released(r->leases_released);
  response->set_blocks_dropped(r->blocks_dropped);
  response->set_blocks_kept(r->blocks_kept);
  return grpc::Status::OK;
}

std::unique_ptr<StreamIdleReaper::Watch> KvCacheService::WatchIdle(grpc::ServerContext* context) {
  if (deps_.idle_reaper == nullptr) return StreamIdleReaper::Unwatched();
  return deps_.idle_reaper->Track([context] { context->TryCancel(); });
}

grpc::Status KvCacheService::RegisterMemory(grpc::ServerContext* context,
                                            const v1::RegisterMemoryRequest* request,
                                            v1::RegisterMemoryResponse* response) {
  KVTIER_ADMIT("RegisterMemory", who);
  RegionRequest req;
  req.tenant = who->tenant;
  req.owner_pid = request->owner_pid();
  const v1::MemoryRegion& r = request->region();
  if (r.has_shared_memory()) {
    req.kind = RegionRequest::Kind::kSharedMemory;
    req.shm_path = r.shared_memory().path();
    req.shm_size_bytes = r.shared_memory().size_bytes();
  } else if (r.has_cuda_ipc()) {
    req.kind = RegionRequest::Kind::kCudaIpc;
    req.cuda_ipc.device = r.cuda_ipc().device();
    for (const v1::CudaIpcTensor& t : r.cuda_ipc().tensors()) {
      req.cuda_ipc.tensors.push_back({t.handle(), t.offset(), t.size_bytes()});
    }
  }
  absl::StatusOr<std::unique_ptr<MemoryRegion>> opened = region_registration_.Open(req);
  if (!opened.ok()) return Finish("RegisterMemory", opened.status());
  std::unique_ptr<MemoryRegion> region = *std::move(opened);
  const std::string described = region->Describe();
  const uint64_t size = region->size();
  absl::StatusOr<std::string> id =
      deps_.regions->Add(std::move(region), static_cast<int>(request->owner_pid()), who->tenant);
  if (!id.ok()) return Finish("RegisterMemory", id.status());
  spdlog::info("registered memory region {}: {}{}", *id, described,
               request->owner_pid() ? absl::StrCat(", owned by pid ", request->owner_pid()) : "");
  response->set_region_id(*id);
  response->set_size_bytes(size);
  return grpc::Status::OK;
}

grpc::Status KvCacheService::UnregisterMemory(grpc::ServerContext* context,
                                              const v1::UnregisterMemoryRequest* request,
                                              v1::UnregisterMemoryResponse*) {
  KVTIER_ADMIT("UnregisterMemory", who);
  if (request->region_id().empty()) {
    return Finish("UnregisterMemory", absl::InvalidArgumentError("region_id is required"));
  }
  return Finish("UnregisterMemory", deps_.regions->Remove(request->region_id(), who->tenant));
}

grpc::Status KvCacheService::RegionTransfer(
    const char* rpc, bool save, const Identity& who, grpc::ServerContext* context,
    const std::string& namespace_id, const std::string& region_id,
    const google::protobuf::RepeatedPtrField<v1::BlockRef>& refs,
    grpc::ServerWriter<v1::BlockCompletion>* writer, std::optional<uint8_t> retention) {
  absl::StatusOr<NamespaceId> ns = NamespaceIdFromProto(namespace_id);
  if (!ns.ok()) return Finish(rpc, ns.status());
  if (absl::Status s = deps_.cache->CheckTenant(*ns, who.tenant); !s.ok()) return Finish(rpc, s);
  if (refs.empty() ||
      static_cast<uint64_t>(refs.size()) > deps_.cache->options().max_keys_per_request) {
    return Finish(rpc, absl::InvalidArgumentError(
                           absl::StrCat("blocks: ", refs.size(), " given, 1..",
                                        deps_.cache->options().max_keys_per_request, " allowed")));
  }
  std::vector<RegionBlock> blocks;
  blocks.reserve(refs.size());
  for (int i = 0; i < refs.size(); ++i) {
    const v1::BlockRef& r = refs[i];
    absl::StatusOr<BlockKey> key = BlockKey::Create(r.key());
    if (!key.ok()) {
      return Finish(rpc, absl::InvalidArgumentError(
                             absl::StrCat("blocks[", i, "].key: ", key.status().message())));
    }
    if (!save && !r.parent_key().empty()) {
      return Finish(rpc, absl::InvalidArgumentError(
                             absl::StrCat("blocks[", i, "]: parent_key is for Save only")));
    }
    absl::StatusOr<BlockKey> parent = OptionalKeyFromProto(r.parent_key(), "parent_key");
    if (!parent.ok()) {
      return Finish(rpc, absl::InvalidArgumentError(
                             absl::StrCat("blocks[", i, "].", parent.status().message())));
    }
    RegionBlock block{*key, *parent, r.offset(), r.size_bytes(), {}, r.group()};
    if (r.segments_size() > 0) {
      if (r.offset() != 0 || r.size_bytes() != 0) {
        return Finish(rpc, absl::InvalidArgumentError(absl::StrCat(
                               "blocks[", i, "]: give offset and size_bytes, or segments")));
      }
      if (static_cast<size_t>(r.segments_size()) > kMaxSegmentsPerBlock) {
        return Finish(rpc, absl::InvalidArgumentError(absl::StrCat(
                               "blocks[", i, "]: more than ", kMaxSegmentsPerBlock, " segments")));
      }
      for (const v1::RegionSegment& seg : r.segments()) {
        block.segments.push_back({seg.offset(), seg.size_bytes()});
      }
    }
    blocks.push_back(std::move(block));
  }
  absl::StatusOr<std::shared_ptr<MemoryRegion>> region = deps_.regions->Find(region_id, who.tenant);
  if (!region.ok()) return Finish(rpc, region.status());
  v1::BlockCompletion c;
  const std::unique_ptr<StreamIdleReaper::Watch> watch = WatchIdle(context);
  auto sink = [&](const BlockOutcome& o) {
    if (context->IsCancelled()) return false;
    c.Clear();
    c.set_index(o.index);
    c.set_key(std::string(blocks[o.index].key.bytes()));
    c.set_code(static_cast<int32_t>(o.status.code()));
    c.set_message(std::string(o.status.message()));
    c.set_size_bytes(o.bytes);
    if (!writer->Write(c)) return false;
    watch->Touch();
    return true;
  };
  const KeepGoing keep_going = [context] { return !context->IsCancelled(); };
  const std::shared_ptr<BlockTransform> transform = deps_.transforms->Find(*ns);
  return Finish(rpc, save ? SaveFromRegion(*deps_.cache, *ns, **region, blocks, sink, keep_going,
                                           deps_.copy_engine, transform.get(), retention)
                          : LoadIntoRegion(*deps_.cache, *ns, **region, blocks, sink, keep_going,
                                           deps_.copy_engine, transform.get(), deps_.gpu_tier));
}

grpc::Status KvCacheService::Save(grpc::ServerContext* context, const v1::SaveRequest* request,
                                  grpc::ServerWriter<v1::BlockCompletion>* writer) {
  KVTIER_ADMIT("Save", who);
  absl::StatusOr<std::optional<uint8_t>> retention =
      RetentionFromProto(request->has_retention_priority(), request->retention_priority());
  if (!retention.ok()) return Finish("Save", retention.status());
  return RegionTransfer("Save", true, *who, context, request->namespace_id(), request->region_id(),
                        request->blocks(), writer, *retention);
}

grpc::Status KvCacheService::Load(grpc::ServerContext* context, const v1::LoadRequest* request,
                                  grpc::ServerWriter<v1::BlockCompletion>* writer) {
  KVTIER_ADMIT("Load", who);
  return RegionTransfer("Load", false, *who, context, request->namespace_id(), request->region_id(),
                        request->blocks(), writer);
}

grpc::Status KvCacheService::Transfer(grpc::ServerContext* context,
                                      const v1::TransferRequest* request,
                                      v1::TransferResponse* response) {
  KVTIER_ADMIT("Transfer", who);
  absl::StatusOr<NamespaceKeys> nk =
      NamespaceKeysFromProto(request->namespace_id(), request->keys());
  if (!nk.ok()) return ToGrpc(nk.status());
  if (absl::Status s = deps_.cache->CheckTenant(nk->ns, who->tenant); !s.ok()) {
    return Finish("Transfer", s);
  }
  if (request->timeout_ms() > 600'000) {
    return ToGrpc(absl::InvalidArgumentError("timeout_ms must be at most 600000"));
  }
  if (deps_.cache->IsHybrid(nk->ns)) {
    return Finish("Transfer", absl::UnimplementedError(
                                  "Transfer of a namespace with layer groups is not supported yet; "
                                  "save the groups on the peer with Save"));
  }
  const absl::Duration timeout = absl::Milliseconds(request->timeout_ms());
  absl::StatusOr<TransferOutcome> outcome;
  switch (request->direction()) {
    case v1::TRANSFER_DIRECTION_PUSH:
      outcome = deps_.peer_transfer->Push(nk->ns, nk->keys, request->peer(), timeout);
      break;
    case v1::TRANSFER_DIRECTION_PULL:
      outcome = deps_.peer_transfer->Pull(nk->ns, nk->keys, request->peer(), timeout);
      break;
    default:
      return ToGrpc(absl::InvalidArgumentError("direction must be PUSH or PULL"));
  }
  if (!outcome.ok()) return ToGrpc(outcome.status());
  StatusesToCompletions(outcome->blocks, nk->keys, outcome->sizes, response->mutable_blocks());
  response->set_bytes_moved(outcome->bytes_moved);
  response->set_transport_seconds(outcome->transport_seconds);
  response->set_lanes(outcome->lanes);
  return grpc::Status::OK;
}

#undef KVTIER_ADMIT

}  // namespace kvtier
