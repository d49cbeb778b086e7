#include "server/admin_service.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/async/unary_call.h"
#include "server/build_info.h"
#include "server/cluster_view.h"
#include "server/grpc_auth.h"
#include "server/proto_convert.h"
#include "server/rpc_roles.h"
#include "server/watch_blocks_reactor.h"
#include "spdlog/spdlog.h"

namespace kvtier {

void AdminService::StatusView(v1::GetStatusResponse* response, bool scan_for_stranded) {
  const CacheSnapshot snap = deps_.cache->Snapshot(scan_for_stranded);
  v1::BuildInfo* build = response->mutable_build();
  build->set_version(kKvtierVersion);
  build->set_with_cuda(kBuiltWithCuda);
  build->set_with_ucx(kBuiltWithUcx);
  build->set_with_uring(kBuiltWithUring);
  response->mutable_gpu()->set_device_count(static_cast<uint32_t>(deps_.gpus.devices.size()));
  response->mutable_gpu()->set_detail(deps_.gpus.detail);
  response->mutable_gpu()->set_copy_engine(deps_.copy_engine.name);
  response->mutable_gpu()->set_copy_engine_detail(deps_.copy_engine.detail);
  if (deps_.gpu_tier != nullptr) {
    const GpuTier::Stats t = deps_.gpu_tier->stats();
    v1::GpuInfo* g = response->mutable_gpu();
    g->set_tier_capacity_bytes(t.capacity_bytes);
    g->set_tier_resident_bytes(t.resident_bytes);
    g->set_tier_resident_blocks(t.resident_blocks);
    g->set_tier_hits(t.hits);
    g->set_tier_promotions(t.promotions);
    g->set_tier_evictions(t.evictions);
  } else {
    response->mutable_gpu()->set_tier_note(deps_.gpu_tier_note);
  }
  {
    MutexLock lock(&mu_);
    response->set_listen_address(listen_address_);
  }
  response->set_uptime_seconds(
      static_cast<uint64_t>(absl::ToInt64Seconds(absl::Now() - deps_.started)));
  response->set_namespaces(snap.namespaces);
  response->set_blocks(snap.blocks);
  response->set_bytes(snap.bytes);
  response->set_active_leases(snap.active_leases);
  {
    const PeerTransferInfo info = deps_.peer_transfer->Info();
    v1::TransferInfo* t = response->mutable_transfer();
    t->set_available(info.available);
    t->set_detail(info.detail);
    t->set_role(PeerRoleName(info.role));
    t->set_transport(info.transport.name);
    t->set_transports(info.transport.transports);
    t->set_detects_peer_failure(info.transport.detects_peer_failure);
    t->set_net_devices(info.transport.net_devices);
  }
  response->set_registered_regions(static_cast<uint32_t>(deps_.regions->size()));
  response->set_stranded_blocks(snap.stranded_blocks);
  response->set_stranded_bytes(snap.stranded_bytes);
  response->mutable_eviction()->set_policy(snap.eviction_policy);
  response->mutable_eviction()->set_history_bytes(snap.eviction_history_bytes);
  const PlannerSnapshot planner = deps_.planner->Snapshot();
  v1::PlannerStatus* ps = response->mutable_planner();
  ps->set_enabled(planner.enabled);
  ps->set_gpu(planner.gpu);
  ps->set_mfu(planner.mfu);
  ps->set_note(planner.note);
  ps->set_plans_fetch(planner.decisions.fetch);
  ps->set_plans_partial(planner.decisions.partial);
  ps->set_plans_recompute(planner.decisions.recompute);
  ps->set_planned_fetch_tokens(planner.decisions.fetch_tokens);
  ps->set_planned_recompute_tokens(planner.decisions.recompute_tokens);
  ps->set_estimated_seconds_saved(planner.decisions.seconds_saved);
  for (const TierReading& t : planner.tiers) {
    v1::TierEstimate* e = ps->add_tiers();
    e->set_tier(t.tier == "host" ? v1::TIER_KIND_HOST : v1::TIER_KIND_NVME);
    e->set_bytes_per_s(t.estimate.bytes_per_s);
    e->set_latency_s(t.estimate.latency_s);
    e->set_samples(t.estimate.samples);
    e->set_source(t.estimate.source);
  }
  const CacheCounters& c = snap.counters;
  v1::Counters* out = response->mutable_counters();
  out->set_lookup_keys(c.lookup_keys);
  out->set_lookup_hits(c.lookup_hits);
  out->set_blocks_put(c.blocks_put);
  out->set_bytes_put(c.bytes_put);
  out->set_blocks_get(c.blocks_get);
  out->set_bytes_get(c.bytes_get);
  out->set_evictions(c.evictions);
  out->set_checksum_mismatches(c.checksum_mismatches);
  out->set_dropped_descendants(c.dropped_descendants);
  out->set_blocks_deleted(c.blocks_deleted);
  out->set_leases_taken(c.leases_taken);
  out->set_leases_expired(c.leases_expired);
  out->set_host_hits(c.host_hits);
  out->set_nvme_hits(c.nvme_hits);
  out->set_promotions(c.promotions);
  out->set_demotions(c.demotions);
  out->set_bytes_host_to_nvme(c.bytes_host_to_nvme);
  out->set_bytes_nvme_to_host(c.bytes_nvme_to_host);
  out->set_host_copies_dropped(c.host_copies_dropped);
  out->set_nvme_evictions(c.nvme_evictions);
  out->set_admissions_refused_filter(c.admissions_refused_filter);
  out->set_admissions_refused_value(c.admissions_refused_value);
  out->set_admissions_refused_budget(c.admissions_refused_budget);
  out->set_admissions_refused_full(c.admissions_refused_full);
  out->set_nvme_write_failures(c.nvme_write_failures);
  out->set_nvme_read_failures(c.nvme_read_failures);
  out->set_recovered_blocks(c.recovered_blocks);
  out->set_recovery_dropped(c.recovery_dropped);
  out->set_group_blocks_unusable(c.group_blocks_unusable);
  v1::NvmeStatus* nvme = response->mutable_nvme();
  nvme->set_enabled(snap.nvme.enabled);
  nvme->set_io_engine(snap.nvme.io_engine);
  nvme->set_write_policy(snap.nvme.write_policy);
  nvme->set_degraded(snap.nvme.degraded);
  nvme->set_last_error(snap.nvme.last_error);
}

void AdminService::TiersView(v1::ListTiersResponse* response) {
  const CacheSnapshot snap = deps_.cache->Snapshot();
  auto add = [response](v1::TierKind kind, const TierSnapshot& tier) {
    v1::TierStatus* t = response->add_tiers();
    t->set_kind(kind);
    t->set_capacity_bytes(tier.capacity_bytes);
    t->set_used_bytes(tier.used_bytes);
    t->set_stored_bytes(tier.stored_bytes);
    t->set_blocks(tier.blocks);
    t->set_evictions(tier.evictions);
    t->set_evictable_blocks(tier.evictable_blocks);
    return t;
  };
  add(v1::TIER_KIND_HOST, snap.host);
  if (snap.nvme.enabled) {
    v1::TierStatus* t = add(v1::TIER_KIND_NVME, snap.nvme.tier);
    for (const NvmeDeviceStats& d : snap.nvme.devices) {
      v1::DeviceStatus* dev = t->add_devices();
      dev->set_dir(d.dir);
      dev->set_capacity_bytes(d.capacity_bytes);
      dev->set_used_bytes(d.used_bytes);
      dev->set_bytes_written(d.bytes_written);
      dev->set_bytes_read(d.bytes_read);
    }
  }
}

void AdminService::NamespacesView(v1::ListNamespacesResponse* response, bool scan_groups) {
  for (const NamespaceSnapshot& ns : deps_.cache->Namespaces(scan_groups)) {
    v1::NamespaceStatus* out = response->add_namespaces();
    out->set_namespace_id(ns.id.ToHex());
    out->set_model_id(ns.spec.model_id);
    LayoutToProto(ns.spec.layout, out->mutable_layout());
    GroupsToProto(ns.spec.groups, out->mutable_layout());
    for (const GroupSnapshot& g : ns.groups) {
      v1::GroupStatus* gs = out->add_groups();
      gs->set_kind(static_cast<v1::LayerGroup::Kind>(g.kind));
      gs->set_block_bytes(g.block_bytes);
      gs->set_blocks(g.blocks);
      gs->set_bytes(g.bytes);
      gs->set_nvme_blocks(g.on_nvme_blocks);
      gs->set_host_blocks(g.in_host_blocks);
      gs->set_stranded_blocks(g.stranded_blocks);
      gs->set_stranded_bytes(g.stranded_bytes);
      gs->set_evictions(g.evictions);
    }
    out->set_block_bytes(ns.block_bytes);
    out->set_blocks(ns.blocks);
    out->set_bytes(ns.bytes);
    out->set_salted(!ns.spec.salt.empty());
    out->set_tenant(ns.spec.tenant);
    if (std::shared_ptr<BlockTransform> t = deps_.transforms->Find(ns.id); t != nullptr) {
      const BlockTransform::Stats stats = t->stats();
      out->set_encoding(t->Describe());
      out->set_fp8_values(stats.values);
      out->set_fp8_clipped(stats.clipped);
    }
    if (std::optional<NamespacePlanning> p = deps_.planner->Namespace(ns.id); p.has_value()) {
      out->set_cost_model(p->cost_model);
      out->set_nvme_admitted(p->nvme_admitted);
      out->set_nvme_value_seconds_per_token(p->nvme_value_seconds_per_token);
    } else {
      out->set_nvme_admitted(true);
    }
  }
}

void AdminService::WearView(v1::GetWearResponse* response) {
  const CacheSnapshot snap = deps_.cache->Snapshot();
  response->set_nvme_enabled(snap.nvme.enabled);
  response->set_admissions_refused_budget(snap.counters.admissions_refused_budget);
  bool admitting = snap.nvme.enabled;
  std::string reason = snap.nvme.enabled ? "" : "the nvme tier is off";
  for (const DeviceWear& w : deps_.cache->Wear()) {
    v1::DeviceWear* d = response->add_devices();
    d->set_dir(w.dir);
    d->set_capacity_bytes(w.options.capacity_bytes);
    d->set_dwpd(w.options.dwpd);
    d->set_warranty_years(w.options.warranty_years);
    d->set_safety(w.options.safety);
    d->set_budget_bytes_per_day(w.report.budget_bytes_per_day);
    d->set_tbw_bytes(w.report.tbw_bytes);
    d->set_bytes_written(w.report.bytes_written);
    d->set_write_rate_bytes_per_s(w.report.write_rate_bytes_per_s);
    d->set_days_to_wear_out(w.report.days_to_wear_out);
    d->set_available_bytes(w.report.tokens_bytes);
    d->set_over_budget(w.report.over_budget);
    d->set_smart_available(w.smart.available);
    d->set_smart_detail(w.smart.detail);
    d->set_smart_data_units_written_bytes(w.smart.data_units_written_bytes);
    d->set_smart_percentage_used(w.smart.percentage_used);
    if (w.report.over_budget) {
      admitting = false;
      reason = absl::StrCat(w.dir, " is over its write budget of ",
                            static_cast<uint64_t>(w.report.budget_bytes_per_day),
                            " bytes/day (capacity x DWPD x safety); admission to nvme resumes "
                            "as the budget refills");
    }
  }
  response->set_admitting(admitting);
  response->set_reason(reason);
}

void AdminService::PeersView(v1::ListPeersResponse* response) {
  for (const PeerStats& p : deps_.peer_transfer->Peers()) {
    v1::PeerStatus* out = response->add_peers();
    out->set_address(p.address);
    out->set_daemon_id(p.daemon_id);
    out->set_role(p.role);
    out->set_lanes(p.lanes);
    out->set_connected(p.connected);
    out->set_bytes_sent(p.bytes_sent);
    out->set_bytes_received(p.bytes_received);
    out->set_blocks_sent(p.blocks_sent);
    out->set_blocks_received(p.blocks_received);
    out->set_transfers(p.transfers);
    out->set_failed_transfers(p.failed_transfers);
    out->set_observed_bytes_per_second(p.observed_bytes_per_second());
    out->set_last_error(p.last_error);
    out->set_connects(p.connects);
  }
}

absl::Status AdminService::ClusterAnswer(const v1::GetClusterRequest& request,
                                         v1::GetClusterResponse* response) {
  const Membership* membership = nullptr;
  const ClusterTier* tier = nullptr;
  std::string note;
  {
    MutexLock lock(&mu_);
    membership = membership_;
    tier = cluster_tier_;
    note = cluster_tier_note_;
  }
  EventsView(response->mutable_events());
  return ClusterToProto(membership, tier, note, deps_.cluster_etcd, request,
                        deps_.max_keys_per_request, response);
}

void AdminService::EventsView(v1::EventsStatus* out) const {
  out->set_zmq_endpoint(deps_.zmq_endpoint);
  out->set_zmq_replay_endpoint(deps_.zmq_replay_endpoint);
  if (deps_.events != nullptr) {
    out->set_reported(deps_.events->events_reported());
    out->set_subscribers(static_cast<uint32_t>(deps_.events->subscribers()));
    out->set_subscribers_lost(deps_.events->subscribers_lost());
  }
  if (deps_.zmq_events != nullptr) {
    out->set_zmq_messages(deps_.zmq_events->messages_published());
    out->set_zmq_events(deps_.zmq_events->events_published());
    out->set_zmq_resyncs(deps_.zmq_events->resyncs());
  }
}

void AdminService::ClusterView(v1::GetClusterResponse* response) {
  ClusterAnswer(v1::GetClusterRequest(), response).IgnoreError();  // no keys asked: cannot fail
}

AdminService::AdminService(Deps deps)
    : deps_(std::move(deps)),
      limits_("Admin",
              {"GetStatus", "ListTiers", "ListNamespaces", "GetWear", "ListPeers", "ListBlocks",
               "Evict", "GetCluster", "WatchBlocks"},
              deps_.max_calls_per_method) {
  if (deps_.executor == nullptr) {
    spdlog::critical("AdminService needs a CallExecutor");
    std::abort();
  }
}

#define KVTIER_UNARY(Method) \
  KVTIER_UNARY_ON_EXECUTOR(AdminService, Method, *deps_.executor, limits_)
KVTIER_UNARY(GetStatus)
KVTIER_UNARY(ListTiers)
KVTIER_UNARY(ListNamespaces)
KVTIER_UNARY(GetWear)
KVTIER_UNARY(ListPeers)
KVTIER_UNARY(ListBlocks)
KVTIER_UNARY(GetCluster)
#undef KVTIER_UNARY

grpc::ServerWriteReactor<v1::EvictProgress>* AdminService::Evict(Ctx* context,
                                                                 const v1::EvictRequest* request) {
  absl::StatusOr<CallLimit::Ticket> ticket = limits_.Of("Evict").Enter();
  auto* out =
      new QueuedWriter<v1::EvictProgress>(ticket.ok() ? *std::move(ticket) : CallLimit::Ticket());
  if (!ticket.ok()) {
    out->Close(ToGrpc(ticket.status()));
  } else if (!deps_.executor->Submit([=, this] { out->Close(DoEvict(context, request, out)); })) {
    out->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
  }
  return out;
}

grpc::ServerWriteReactor<v1::BlockEvents>* AdminService::WatchBlocks(
    Ctx* context, const v1::WatchBlocksRequest* request) {
  absl::StatusOr<CallLimit::Ticket> ticket = limits_.Of("WatchBlocks").Enter();
  auto* watch =
      new WatchBlocksReactor(context, ticket.ok() ? *std::move(ticket) : CallLimit::Ticket());
  if (!ticket.ok()) {
    watch->Fail(ToGrpc(ticket.status()));
    return watch;
  }
  // The admission and a snapshot (O(blocks) under the cache's lock) run on
  // the executor, not on gRPC's thread.
  const bool queued = deps_.executor->Submit([=, this] {
    if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Admin", "WatchBlocks"));
        !s.ok()) {
      return watch->Fail(s);
    }
    if (deps_.events == nullptr) {
      return watch->Fail(grpc::Status(grpc::StatusCode::UNAVAILABLE, "block events are off"));
    }
    std::optional<NamespaceId> ns;
    if (!request->namespace_id().empty()) {
      absl::StatusOr<NamespaceId> id = NamespaceIdFromProto(request->namespace_id());
      if (!id.ok()) return watch->Fail(ToGrpc(id.status()));
      if (absl::StatusOr<uint64_t> open = deps_.cache->NamespaceBlockBytes(*id); !open.ok()) {
        return watch->Fail(ToGrpc(open.status()));
      }
      if (deps_.cache->IsHybrid(*id)) {
        return watch->Fail(ToGrpc(absl::InvalidArgumentError(
            "a hybrid namespace's blocks carry their layer groups' storage ids: watch every "
            "namespace instead")));
      }
      ns = *id;
    }
    watch->Begin(deps_.events, ns, request->snapshot());
  });
  if (!queued) watch->Fail(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
  return watch;
}

grpc::Status AdminService::DoGetStatus(Ctx* context, const v1::GetStatusRequest*,
                                       v1::GetStatusResponse* response) {
  if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Admin", "GetStatus")); !s.ok())
    return s;
  StatusView(response);
  return grpc::Status::OK;
}

grpc::Status AdminService::DoListTiers(Ctx* context, const v1::ListTiersRequest*,
                                       v1::ListTiersResponse* response) {
  if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Admin", "ListTiers")); !s.ok())
    return s;
  TiersView(response);
  return grpc::Status::OK;
}

grpc::Status AdminService::DoListNamespaces(Ctx* context, const v1::ListNamespacesRequest*,
                                            v1::ListNamespacesResponse* response) {
  if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Admin", "ListNamespaces")); !s.ok())
    return s;
  NamespacesView(response, /*scan_groups=*/true);
  return grpc::Status::OK;
}

grpc::Status AdminService::DoGetWear(Ctx* context, const v1::GetWearRequest*,
                                     v1::GetWearResponse* response) {
  if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Admin", "GetWear")); !s.ok())
    return s;
  WearView(response);
  return grpc::Status::OK;
}

grpc::Status AdminService::DoListPeers(Ctx* context, const v1::ListPeersRequest*,
                                       v1::ListPeersResponse* response) {
  if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Admin", "ListPeers")); !s.ok())
    return s;
  PeersView(response);
  return grpc::Status::OK;
}

grpc::Status AdminService::DoGetCluster(Ctx* context, const v1::GetClusterRequest* request,
                                        v1::GetClusterResponse* response) {
  if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Admin", "GetCluster")); !s.ok())
    return s;
  return ToGrpc(ClusterAnswer(*request, response));
}

grpc::Status AdminService::DoListBlocks(Ctx* context, const v1::ListBlocksRequest* request,
                                        v1::ListBlocksResponse* response) {
  if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Admin", "ListBlocks")); !s.ok())
    return s;
  absl::StatusOr<NamespaceId> ns = NamespaceIdFromProto(request->namespace_id());
  if (!ns.ok()) return ToGrpc(ns.status());
  if (request->top() > 10000) {
    return ToGrpc(absl::InvalidArgumentError("top must be at most 10000"));
  }
  auto top = deps_.cache->TopBlocks(*ns, request->top() == 0 ? 20 : request->top());
  if (!top.ok()) return ToGrpc(top.status());
  for (const BlockView& b : top->first) {
    v1::BlockStatus* out = response->add_blocks();
    out->set_key(std::string(b.key.bytes()));
    if (!b.parent.empty()) out->set_parent_key(std::string(b.parent.bytes()));
    out->set_size_bytes(b.size);
    if (b.in_host) out->add_tiers(v1::TIER_KIND_HOST);
    if (b.on_nvme) out->add_tiers(v1::TIER_KIND_NVME);
    out->set_uses(b.uses);
    out->set_leases(b.leases);
    out->set_children(b.children);
  }
  response->set_total_blocks(top->second);
  return grpc::Status::OK;
}

grpc::Status AdminService::DoEvict(Ctx* context, const v1::EvictRequest* request,
                                   QueuedWriter<v1::EvictProgress>* out) {
  if (grpc::Status s = AdmitRole(*deps_.auth, *context, RoleOf("Admin", "Evict")); !s.ok())
    return s;
  std::optional<NamespaceId> ns;
  if (request->namespace_id().empty()) {
    if (!request->all_namespaces()) {
      return ToGrpc(absl::InvalidArgumentError(
          "give namespace_id, or set all_namespaces to evict from every namespace"));
    }
  } else {
    absl::StatusOr<NamespaceId> id = NamespaceIdFromProto(request->namespace_id());
    if (!id.ok()) return ToGrpc(id.status());
    if (absl::StatusOr<uint64_t> open = deps_.cache->NamespaceBlockBytes(*id); !open.ok()) {
      return ToGrpc(open.status());
    }
    ns = *id;
  }
  // Batches keep each hold of the cache's lock short; progress after each.
  constexpr size_t kBatch = 4096;
  v1::EvictProgress progress;
  bool first = true;
  for (;;) {
    const EvictResult r = deps_.cache->Evict(ns, kBatch);
    if (first) progress.set_blocks_total(r.blocks_evicted + r.blocks_left);
    first = false;
    progress.set_blocks_evicted(progress.blocks_evicted() + r.blocks_evicted);
    progress.set_bytes_freed(progress.bytes_freed() + r.bytes_freed);
    progress.set_blocks_left(r.blocks_left);
    const bool done = r.blocks_evicted == 0 || r.blocks_left == 0;
    progress.set_done(done);
    if (!out->Push(progress)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "client went away during Evict");
    }
    if (done) break;
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "Evict cancelled");
    }
  }
  spdlog::info("evicted {} blocks ({} bytes) from {}; {} left (pinned or with pinned descendants)",
               progress.blocks_evicted(), progress.bytes_freed(),
               ns.has_value() ? ns->ToHex() : std::string("every namespace"),
               progress.blocks_left());
  return grpc::Status::OK;
}

}  // namespace kvtier
