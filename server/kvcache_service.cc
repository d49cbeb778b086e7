#include "server/kvcache_service.h"

#include <algorithm>
#include <cstdlib>
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
#include "server/async/unary_call.h"
#include "server/completion_runs.h"
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
      }),
      limits_("KvCache",
              {"OpenNamespace", "Lookup", "Put", "Get", "Release", "Delete", "CloseNamespace",
               "RegisterMemory", "UnregisterMemory", "Save", "Load", "Transfer"},
              deps_.max_calls_per_method) {
  if (deps_.executor == nullptr || deps_.transfer_executor == nullptr) {
    spdlog::critical("KvCacheService needs its two CallExecutors");
    std::abort();
  }
  SetMessageAllocatorFor_Lookup(&lookup_messages_);
}

// The unary methods: each body, Do<Method>, runs on the executor
// (server/async/unary_call.h).
#define KVTIER_UNARY(Method) \
  KVTIER_UNARY_ON_EXECUTOR(KvCacheService, Method, *deps_.executor, limits_)
KVTIER_UNARY(OpenNamespace)
// A Lookup is short work under the cache's lock. Without a cluster tier
// (whose Fill waits on the chain's owner), without a retention priority
// (set under a second lock) and with at most kMaxInlineKeys keys, it runs
// on gRPC's thread when the lock is free now and the planner need not
// re-judge NVMe admission, which saves the hand-over to a pool thread;
// else on the executor.
grpc::ServerUnaryReactor* KvCacheService::Lookup(Ctx* context, const v1::LookupRequest* request,
                                                 v1::LookupResponse* response) {
  auto work = [=, this] { return DoLookup(context, request, response); };
  // A long Lookup (many keys) is not short work: on the executor.
  constexpr size_t kMaxInlineKeys = 1024;
  if (deps_.cluster_tier != nullptr || request->has_retention_priority() ||
      LookupKeyCount(*request) > kMaxInlineKeys) {
    return RunUnary(context, *deps_.executor, limits_.Of("Lookup"), std::move(work));
  }
  return RunUnaryInlineFirst(
      context, *deps_.executor, limits_.Of("Lookup"),
      [=, this] { return TryLookupInline(context, request, response); }, std::move(work));
}
KVTIER_UNARY(Release)
KVTIER_UNARY(Delete)
KVTIER_UNARY(CloseNamespace)
KVTIER_UNARY(RegisterMemory)
KVTIER_UNARY(UnregisterMemory)
#undef KVTIER_UNARY
// Transfer waits on peers: its own pool (Deps::transfer_executor).
KVTIER_UNARY_ON_EXECUTOR(KvCacheService, Transfer, *deps_.transfer_executor, limits_)

grpc::Status KvCacheService::DoOpenNamespace(Ctx* context, const v1::OpenNamespaceRequest* request,
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

grpc::Status KvCacheService::DoLookup(Ctx* context, const v1::LookupRequest* request,
                                      v1::LookupResponse* response) {
  KVTIER_ADMIT("Lookup", who);
  absl::StatusOr<NamespaceKeys> req =
      LookupKeysFromProto(*request, deps_.cache->options().max_keys_per_request);
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
  if (deps_.cluster_tier != nullptr) {
    // The part not cached here, from the chain's owner when the cost model
    // says fetching beats recomputing; a failure is a miss.
    deps_.cluster_tier->Fill(req->ns, req->keys, /*judged=*/true, CallDeadline(*context));
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
  return AnswerLookup(*request, req->ns, *r, hybrid_plan.get(), /*may_wait=*/true, response);
}

std::optional<grpc::Status> KvCacheService::TryLookupInline(Ctx* context,
                                                            const v1::LookupRequest* request,
                                                            v1::LookupResponse* response) {
  KVTIER_ADMIT("Lookup", who);
  absl::StatusOr<NamespaceKeys> req =
      LookupKeysFromProto(*request, deps_.cache->options().max_keys_per_request);
  if (!req.ok()) return Finish("Lookup", req.status());
  // NVMe admission to re-judge (which may wait for the cache's lock): on the
  // executor. Else the planner only reads.
  if (!deps_.planner->AdmissionCurrent(req->ns)) return std::nullopt;
  std::unique_ptr<HybridCutPlanner> hybrid_plan =
      deps_.planner->PlanHybrid(req->ns, request->prompt_tokens(), /*may_wait=*/false);
  // The tenant is checked under the Lookup's own lock (DoLookup checks it
  // before).
  absl::StatusOr<std::optional<LookupResult>> r =
      deps_.cache->TryLookup(req->ns, who->tenant, req->keys, request->take_lease(),
                             absl::Milliseconds(request->lease_ttl_ms()), hybrid_plan.get());
  if (!r.ok()) return Finish("Lookup", r.status());
  if (!r->has_value()) return std::nullopt;
  return AnswerLookup(*request, req->ns, **r, hybrid_plan.get(), /*may_wait=*/false, response);
}

grpc::Status KvCacheService::AnswerLookup(const v1::LookupRequest& request, const NamespaceId& ns,
                                          const LookupResult& r, HybridCutPlanner* hybrid_plan,
                                          bool may_wait, v1::LookupResponse* response) {
  response->set_matched(r.matched);
  auto tier = [](const MatchedBlock& b) {
    return b.on_host ? v1::TIER_KIND_HOST : v1::TIER_KIND_NVME;
  };
  auto add_info = [&](const MatchedBlock& b, v1::BlockInfo* info) {
    info->set_key(std::string(b.key.bytes()));
    info->set_size_bytes(b.size);
    info->set_tier(tier(b));
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
  if (!request.compact_reply()) {
    for (const MatchedBlock& b : r.blocks) add_info(b, response->add_blocks());
  } else if (!r.blocks.empty()) {
    v1::CompactBlocks* c = response->mutable_compact_blocks();
    const int n = static_cast<int>(r.blocks.size());
    c->mutable_size_bytes()->Reserve(n);
    c->mutable_tier()->Reserve(n);
    c->mutable_persisted()->Reserve(n);
    for (const MatchedBlock& b : r.blocks) {
      c->add_size_bytes(b.size);
      c->add_tier(tier(b));
      c->add_persisted(b.persisted);
    }
  }
  add_loads(r.groups, response->mutable_groups());
  std::optional<costmodel::CutPlan> plan;
  if (hybrid_plan != nullptr && hybrid_plan->plan().has_value()) {
    deps_.planner->Record(*hybrid_plan, r.matched);
    plan = hybrid_plan->plan();
  } else {
    // Nothing matched of a hybrid (its plan: recompute), or no groups.
    plan = deps_.planner->Plan(ns, r.blocks, request.prompt_tokens(), may_wait);
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
    add_loads(r.chosen_groups, p->mutable_groups());
  }
  if (!r.lease_id.empty()) {
    response->set_lease_id(r.lease_id);
    response->set_lease_expires_unix_ms(static_cast<uint64_t>(absl::ToUnixMillis(r.lease_expiry)));
  }
  return grpc::Status::OK;
}

grpc::Status KvCacheService::DoRelease(Ctx* context, const v1::ReleaseRequest* request,
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

grpc::Status KvCacheService::DoDelete(Ctx* context, const v1::DeleteRequest* request,
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

grpc::Status KvCacheService::DoCloseNamespace(Ctx* context,
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

std::unique_ptr<StreamIdleReaper::Watch> KvCacheService::WatchIdle(
    grpc::ServerContextBase* context) {
  if (deps_.idle_reaper == nullptr) return StreamIdleReaper::Unwatched();
  return deps_.idle_reaper->Track([context] { context->TryCancel(); });
}

grpc::Status KvCacheService::DoRegisterMemory(Ctx* context,
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

grpc::Status KvCacheService::DoUnregisterMemory(Ctx* context,
                                                const v1::UnregisterMemoryRequest* request,
                                                v1::UnregisterMemoryResponse*) {
  KVTIER_ADMIT("UnregisterMemory", who);
  if (request->region_id().empty()) {
    return Finish("UnregisterMemory", absl::InvalidArgumentError("region_id is required"));
  }
  return Finish("UnregisterMemory", deps_.regions->Remove(request->region_id(), who->tenant));
}

grpc::Status KvCacheService::RegionTransfer(
    const char* rpc, bool save, const Identity& who, Ctx* context, const std::string& namespace_id,
    const std::string& region_id, const google::protobuf::RepeatedPtrField<v1::BlockRef>& refs,
    QueuedWriter<v1::BlockCompletion>* out, std::optional<uint8_t> retention, bool runs) {
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
  CompletionRuns completions(
      runs,
      [&](v1::BlockCompletion c) { return !context->IsCancelled() && out->Push(std::move(c)); },
      [&](uint32_t i) { return std::string(blocks[i].key.bytes()); });
  const OutcomeSink sink = [&](const BlockOutcome& o) { return completions.Add(o); };
  const KeepGoing keep_going = [context] { return !context->IsCancelled(); };
  const std::shared_ptr<BlockTransform> transform = deps_.transforms->Find(*ns);
  if (!save) {
    absl::Status loaded =
        LoadIntoRegion(*deps_.cache, *ns, **region, blocks, sink, keep_going, deps_.copy_engine,
                       transform.get(), deps_.gpu_tier, deps_.copy_workers);
    if (!completions.Flush() && loaded.ok()) loaded = absl::CancelledError("Load abandoned");
    return Finish(rpc, loaded);
  }
  absl::Status saved =
      SaveFromRegion(*deps_.cache, *ns, **region, blocks, sink, keep_going, deps_.copy_engine,
                     transform.get(), retention, deps_.copy_workers);
  if (!completions.Flush() && saved.ok()) saved = absl::CancelledError("Save abandoned");
  if (saved.ok() && deps_.cluster_tier != nullptr) {
    deps_.cluster_tier->Offer(*ns, blocks.back().key);  // to the chain's owner, in the background
  }
  return Finish(rpc, saved);
}

grpc::ServerWriteReactor<v1::BlockCompletion>* KvCacheService::StartRegionTransfer(
    const char* rpc, bool save, Ctx* context, const v1::SaveRequest* save_request,
    const v1::LoadRequest* load_request) {
  // The caller and the request's own fields first (cheap, no lock), so a
  // caller that may not call this never holds a place in the limit. RoleOf
  // is evaluated at compile time: one literal per direction.
  absl::StatusOr<Identity> who =
      Admit(*deps_.auth, *context, save ? RoleOf("KvCache", "Save") : RoleOf("KvCache", "Load"));
  absl::StatusOr<std::optional<uint8_t>> retention = std::optional<uint8_t>();
  if (who.ok() && save) {
    retention = RetentionFromProto(save_request->has_retention_priority(),
                                   save_request->retention_priority());
  }
  absl::StatusOr<CallLimit::Ticket> ticket =
      !who.ok()         ? absl::StatusOr<CallLimit::Ticket>(who.status())
      : !retention.ok() ? absl::StatusOr<CallLimit::Ticket>(retention.status())
                        : limits_.Of(rpc).Enter();
  if (!ticket.ok()) {
    return new RefusedCall<grpc::ServerWriteReactor<v1::BlockCompletion>>(
        Finish(rpc, ticket.status()));
  }
  // The writer holds the place and the idle watch until gRPC is done with
  // the call, so a client that stops reading its completions is counted and
  // reaped like any stalled stream.
  auto* out = new QueuedWriter<v1::BlockCompletion>(*std::move(ticket), WatchIdle(context));
  const bool queued =
      deps_.executor->Submit([=, this, who = *std::move(who), retention = *std::move(retention)] {
        out->Close(save ? RegionTransfer(rpc, true, who, context, save_request->namespace_id(),
                                         save_request->region_id(), save_request->blocks(), out,
                                         retention, save_request->completion_runs())
                        : RegionTransfer(rpc, false, who, context, load_request->namespace_id(),
                                         load_request->region_id(), load_request->blocks(), out,
                                         std::nullopt, load_request->completion_runs()));
      });
  if (!queued) out->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
  return out;
}

grpc::ServerWriteReactor<v1::BlockCompletion>* KvCacheService::Save(
    Ctx* context, const v1::SaveRequest* request) {
  return StartRegionTransfer("Save", true, context, request, nullptr);
}

grpc::ServerWriteReactor<v1::BlockCompletion>* KvCacheService::Load(
    Ctx* context, const v1::LoadRequest* request) {
  return StartRegionTransfer("Load", false, context, nullptr, request);
}

grpc::Status KvCacheService::DoTransfer(Ctx* context, const v1::TransferRequest* request,
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
