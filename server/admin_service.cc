#include "server/admin_service.h"

#include "absl/time/clock.h"
#include "server/build_info.h"
#include "server/proto_convert.h"

namespace kvtier {

grpc::Status AdminService::GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*,
                                     v1::GetStatusResponse* response) {
  const CacheSnapshot snap = cache_->Snapshot(/*scan_for_stranded=*/true);
  v1::BuildInfo* build = response->mutable_build();
  build->set_version(kKvtierVersion);
  build->set_with_cuda(kBuiltWithCuda);
  build->set_with_ucx(kBuiltWithUcx);
  build->set_with_uring(kBuiltWithUring);
  response->mutable_gpu()->set_device_count(static_cast<uint32_t>(gpus_.devices.size()));
  response->mutable_gpu()->set_detail(gpus_.detail);
  {
    absl::MutexLock lock(&mu_);
    response->set_listen_address(listen_address_);
  }
  response->set_uptime_seconds(static_cast<uint64_t>(absl::ToInt64Seconds(absl::Now() - started_)));
  response->set_namespaces(snap.namespaces);
  response->set_blocks(snap.blocks);
  response->set_bytes(snap.bytes);
  response->set_active_leases(snap.active_leases);
  response->set_stranded_blocks(snap.stranded_blocks);
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
  return grpc::Status::OK;
}

grpc::Status AdminService::ListTiers(grpc::ServerContext*, const v1::ListTiersRequest*,
                                     v1::ListTiersResponse* response) {
  const TierSnapshot host = cache_->Snapshot().host;
  v1::TierStatus* t = response->add_tiers();
  t->set_kind(v1::TIER_KIND_HOST);
  t->set_capacity_bytes(host.capacity_bytes);
  t->set_used_bytes(host.used_bytes);
  t->set_stored_bytes(host.stored_bytes);
  t->set_blocks(host.blocks);
  t->set_evictions(host.evictions);
  t->set_evictable_blocks(host.evictable_blocks);
  return grpc::Status::OK;
}

grpc::Status AdminService::ListNamespaces(grpc::ServerContext*, const v1::ListNamespacesRequest*,
                                          v1::ListNamespacesResponse* response) {
  for (const NamespaceSnapshot& ns : cache_->Namespaces()) {
    v1::NamespaceStatus* out = response->add_namespaces();
    out->set_namespace_id(ns.id.ToHex());
    out->set_model_id(ns.spec.model_id);
    LayoutToProto(ns.spec.layout, out->mutable_layout());
    out->set_block_bytes(ns.block_bytes);
    out->set_blocks(ns.blocks);
    out->set_bytes(ns.bytes);
    out->set_salted(!ns.spec.salt.empty());
  }
  return grpc::Status::OK;
}

}  // namespace kvtier
