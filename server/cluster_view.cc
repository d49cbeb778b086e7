#include "server/cluster_view.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "server/proto_convert.h"

namespace kvtier {

absl::Status ClusterToProto(const Membership* membership, const ClusterTier* tier,
                            const std::string& tier_note, const std::string& etcd_endpoints,
                            const v1::GetClusterRequest& request, uint32_t max_keys,
                            v1::GetClusterResponse* response) {
  if (static_cast<uint64_t>(request.keys_size()) > max_keys) {
    return absl::InvalidArgumentError(
        absl::StrCat(request.keys_size(), " keys; at most ", max_keys, " per request"));
  }
  NamespaceKeys asked;
  if (!request.namespace_id().empty() || request.keys_size() > 0) {
    ASSIGN_OR_RETURN(asked, NamespaceKeysFromProto(request.namespace_id(), request.keys()));
  }
  if (membership == nullptr) {
    response->set_enabled(false);
    return absl::OkStatus();
  }
  const MembershipView view = membership->View();
  const std::shared_ptr<const RendezvousRing> ring = membership->Ring();
  const std::vector<double> shares = ring->SampleShares();
  response->set_enabled(true);
  response->set_name(membership->options().cluster);
  response->set_node_id(membership->node_id());
  for (absl::string_view e : absl::StrSplit(etcd_endpoints, ',', absl::SkipWhitespace())) {
    response->add_etcd_endpoints(std::string(absl::StripAsciiWhitespace(e)));
  }
  response->set_etcd_up(view.etcd_up);
  response->set_local_only(view.local_only);
  response->set_last_error(view.last_error);
  if (view.last_sync != absl::InfinitePast()) {
    response->set_last_sync_unix_ms(absl::ToUnixMillis(view.last_sync));
  }
  response->set_lease_id(view.lease);
  response->set_lease_ttl_ms(
      static_cast<uint32_t>(absl::ToInt64Milliseconds(membership->options().lease_ttl)));
  for (const MemberRecord& m : view.members) {
    v1::ClusterMember* out = response->add_members();
    out->set_node_id(m.node_id);
    out->set_daemon_id(m.daemon_id);
    out->set_address(m.address);
    out->set_role(m.role);
    out->set_version(m.version);
    out->set_transport(m.transport);
    out->set_host_capacity_bytes(m.host_capacity_bytes);
    out->set_host_free_bytes(m.host_free_bytes);
    out->set_nvme_capacity_bytes(m.nvme_capacity_bytes);
    out->set_nvme_free_bytes(m.nvme_free_bytes);
    out->set_started_unix_ms(absl::ToUnixMillis(m.started));
    out->set_self(m.node_id == membership->node_id());
    for (size_t i = 0; i < ring->members().size(); ++i) {
      if (ring->members()[i] == m.node_id) out->set_key_share(shares[i]);
    }
  }
  response->set_joins(view.joins);
  response->set_leaves(view.leaves);
  response->set_restarts(view.restarts);
  response->set_failed_rounds(view.failed_rounds);
  response->set_bad_records(view.bad_records);
  response->set_conflict(view.conflict);
  v1::ClusterTierStatus* t = response->mutable_tier();
  t->set_enabled(tier != nullptr);
  t->set_detail(tier_note);
  if (tier != nullptr) {
    const ClusterTierStats s = tier->Stats();
    t->set_fills(s.fills);
    t->set_pulled_blocks(s.pulled_blocks);
    t->set_pulled_bytes(s.pulled_bytes);
    t->set_pull_failures(s.pull_failures);
    t->set_pulls_declined(s.pulls_declined);
    t->set_pulls_backed_off(s.pulls_backed_off);
    t->set_offers(s.offers);
    t->set_offered_blocks(s.offered_blocks);
    t->set_offer_failures(s.offer_failures);
    t->set_offers_dropped(s.offers_dropped);
  }
  for (const BlockKey& key : asked.keys) {
    response->add_owners(std::string(ring->OwnerIdOf(asked.ns, key)));
  }
  return absl::OkStatus();
}

}  // namespace kvtier
