#include "server/daemon_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "client/cpp/channel.h"
#include "server/build_info.h"
#include "server/grpc_auth.h"
#include "server/proto_metrics.h"

namespace kvtier {

// Per-RPC counters and latency histograms.
class RpcMetrics {
 public:
  RpcMetrics(prometheus::Registry* registry, const Authenticator* auth)
      : auth_(auth),
        requests_(prometheus::BuildCounter()
                      .Name("kvtier_rpc_requests_total")
                      .Help("gRPC calls finished, by service, method, status code and tenant")
                      .Register(*registry)),
        latency_(prometheus::BuildHistogram()
                     .Name("kvtier_rpc_duration_seconds")
                     .Help("gRPC call latency from its start to its status, by service and method")
                     .Register(*registry)) {}

  void Record(const char* full_method, grpc::ServerContextBase* context, grpc::StatusCode code,
              double seconds) {
    // "/kvtier.v1.KvCache/Put" -> service "kvtier.v1.KvCache", method "Put".
    std::string service = full_method != nullptr ? full_method : "";
    std::string method;
    if (const size_t slash = service.rfind('/'); slash != std::string::npos && slash > 0) {
      method = service.substr(slash + 1);
      service = service.substr(1, slash - 1);
    }
    const std::string tenant = TenantLabel(context);
    requests_
        .Add({{"service", service},
              {"method", method},
              {"code", StatusCodeName(code)},
              {"tenant", tenant}})
        .Increment();
    latency_.Add({{"service", service}, {"method", method}}, Buckets()).Observe(seconds);
  }

 private:
  static const prometheus::Histogram::BucketBoundaries& Buckets() {
    static const auto* b = new prometheus::Histogram::BucketBoundaries{
        50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
        50e-3, 100e-3, 250e-3, 500e-3, 1,    2.5,    5,    10};
    return *b;
  }

  std::string TenantLabel(grpc::ServerContextBase* context) {
    if (context == nullptr) return "none";
    absl::StatusOr<Identity> who = CallerOf(*auth_, *context);
    if (!who.ok()) return "unauthenticated";
    std::string tenant = who->tenant.empty() ? "none" : who->tenant;
    MutexLock lock(&mu_);
    if (tenants_.contains(tenant)) return tenant;
    if (tenants_.size() >= 64) return "other";
    tenants_.insert(tenant);
    return tenant;
  }

  const Authenticator* const auth_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& latency_;
  Mutex mu_;
  absl::flat_hash_set<std::string> tenants_ ABSL_GUARDED_BY(mu_);
};

namespace {

class RpcInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcInterceptor(grpc::experimental::ServerRpcInfo* info, std::shared_ptr<RpcMetrics> metrics)
      : info_(info), metrics_(std::move(metrics)), start_(absl::Now()) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_->Record(info_->method(), info_->server_context(),
                       methods->GetSendStatus().error_code(),
                       absl::ToDoubleSeconds(absl::Now() - start_));
    }
    methods->Proceed();
  }

 private:
  grpc::experimental::ServerRpcInfo* const info_;
  const std::shared_ptr<RpcMetrics> metrics_;
  const absl::Time start_;
};

class RpcInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcInterceptorFactory(std::shared_ptr<RpcMetrics> metrics)
      : metrics_(std::move(metrics)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcInterceptor(info, metrics_);
  }

 private:
  const std::shared_ptr<RpcMetrics> metrics_;
};

}  // namespace

// Reads the Admin views at each scrape.
class AdminViewCollector final : public prometheus::Collectable {
 public:
  AdminViewCollector(AdminService* admin, uint32_t max_namespaces)
      : admin_(admin), max_namespaces_(max_namespaces) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    MetricFamilies out;
    out.Add("kvtier_build_info", prometheus::MetricType::Gauge,
            "Always 1; the labels say the version and the backends built in",
            {{"version", std::string(kKvtierVersion)},
             {"cuda", kBuiltWithCuda ? "yes" : "no"},
             {"ucx", kBuiltWithUcx ? "yes" : "no"},
             {"io_uring", kBuiltWithUring ? "yes" : "no"}},
            1);
    v1::GetStatusResponse status;
    bool scan = false;
    {
      // The stranded-block self-check scans the whole index under the
      // cache's lock: once a minute at most, not at every scrape.
      MutexLock lock(&stranded_mu_);
      const absl::Time now = absl::Now();
      scan = now - last_stranded_scan_ >= absl::Minutes(1);
      admin_->StatusView(&status, scan);
      if (scan) {
        last_stranded_scan_ = now;
        stranded_blocks_ = status.stranded_blocks();
        stranded_bytes_ = status.stranded_bytes();
      } else {
        status.set_stranded_blocks(stranded_blocks_);
        status.set_stranded_bytes(stranded_bytes_);
      }
    }
    out.AddMessage(status, "", {});
    for (const v1::TierEstimate& t : status.planner().tiers()) {
      out.AddMessage(t, "planner_tier_", {{"tier", TierName(t.tier())}});
    }
    v1::ListTiersResponse tiers;
    admin_->TiersView(&tiers);
    for (const v1::TierStatus& t : tiers.tiers()) {
      out.AddMessage(t, "tier_", {{"tier", TierName(t.kind())}});
      for (const v1::DeviceStatus& d : t.devices()) {
        out.AddMessage(d, "nvme_device_", {{"dir", d.dir()}});
      }
    }
    if (status.gpu().tier_capacity_bytes() > 0) {  // the GPU tier as a tier row
      out.Add("kvtier_tier_capacity_bytes", prometheus::MetricType::Gauge, "", {{"tier", "gpu"}},
              static_cast<double>(status.gpu().tier_capacity_bytes()));
      out.Add("kvtier_tier_used_bytes", prometheus::MetricType::Gauge, "", {{"tier", "gpu"}},
              static_cast<double>(status.gpu().tier_resident_bytes()));
      out.Add("kvtier_tier_blocks", prometheus::MetricType::Gauge, "", {{"tier", "gpu"}},
              static_cast<double>(status.gpu().tier_resident_blocks()));
    }
    AddNamespaces(&out, scan);
    v1::GetWearResponse wear;
    admin_->WearView(&wear);
    out.AddMessage(wear, "wear_", {});
    for (const v1::DeviceWear& d : wear.devices()) out.AddMessage(d, "wear_", {{"dir", d.dir()}});
    v1::ListPeersResponse peers;
    admin_->PeersView(&peers);
    for (const v1::PeerStatus& p : peers.peers()) {
      out.AddMessage(p, "peer_", {{"peer", p.address()}, {"role", p.role()}});
    }
    AddCluster(&out);
    return out.Take();
  }

 private:
  // "host" for TIER_KIND_HOST, as the CLI names tiers.
  static std::string TierName(v1::TierKind kind) {
    return absl::AsciiStrToLower(absl::StripPrefix(v1::TierKind_Name(kind), "TIER_KIND_"));
  }

  static void AddClusterSample(MetricFamilies* out, const std::string& name, bool counter,
                               const std::string& help, double value,
                               const MetricLabels& labels = {}) {
    out->Add(name, counter ? prometheus::MetricType::Counter : prometheus::MetricType::Gauge, help,
             labels, value);
  }

  // The cluster as this member sees it (zero when it runs alone).
  void AddCluster(MetricFamilies* out) const {
    v1::GetClusterResponse c;
    admin_->ClusterView(&c);
    // Every series exists alone too (zero), so dashboards and alerts can
    // name them whether or not the daemon is in a cluster.
    AddClusterSample(out, "kvtier_cluster_enabled", false, "cluster.etcd is set", c.enabled());
    AddClusterSample(out, "kvtier_cluster_etcd_up", false, "the last membership round reached etcd",
                     c.etcd_up());
    AddClusterSample(out, "kvtier_cluster_local_only", false,
                     "the hash ring is this node alone (etcd away over a lease TTL)",
                     c.local_only());
    AddClusterSample(out, "kvtier_cluster_members", false, "members in the last read of etcd",
                     c.members_size());
    for (const v1::ClusterMember& m : c.members()) {
      AddClusterSample(out, "kvtier_cluster_member_key_share", false,
                       "fraction of sample keys the member owns", m.key_share(),
                       {{"member", m.node_id()}});
    }
    AddClusterSample(out, "kvtier_cluster_joins_total", true, "", static_cast<double>(c.joins()));
    AddClusterSample(out, "kvtier_cluster_leaves_total", true, "", static_cast<double>(c.leaves()));
    AddClusterSample(out, "kvtier_cluster_restarts_total", true, "",
                     static_cast<double>(c.restarts()));
    AddClusterSample(out, "kvtier_cluster_failed_rounds_total", true, "",
                     static_cast<double>(c.failed_rounds()));
    AddClusterSample(out, "kvtier_cluster_bad_records", false, "",
                     static_cast<double>(c.bad_records()));
    out->AddMessage(c.tier(), "cluster_tier_", {});
    // kvtier_events_{reported,zmq_messages,zmq_events,zmq_resyncs,
    // subscribers_lost}_total and kvtier_events_subscribers.
    out->AddMessage(c.events(), "events_", {});
  }

  // `scan`: this scrape runs the minute's self-check, which also counts each
  // hybrid group's NVMe and stranded blocks; other scrapes repeat the last.
  void AddNamespaces(MetricFamilies* out, bool scan) const {
    v1::ListNamespacesResponse list;
    admin_->NamespacesView(&list, scan);
    {
      MutexLock lock(&stranded_mu_);
      for (v1::NamespaceStatus& ns : *list.mutable_namespaces()) {
        for (int g = 0; g < ns.groups_size(); ++g) {
          v1::GroupStatus* gs = ns.mutable_groups(g);
          const std::pair<std::string, int> id = {ns.namespace_id(), g};
          if (scan) {
            group_scan_[id] = *gs;
          } else if (auto it = group_scan_.find(id); it != group_scan_.end()) {
            gs->set_nvme_blocks(it->second.nvme_blocks());
            gs->set_host_blocks(it->second.host_blocks());
            gs->set_stranded_blocks(it->second.stranded_blocks());
            gs->set_stranded_bytes(it->second.stranded_bytes());
          }
        }
      }
      if (scan) {  // forget namespaces gone since the last scan
        for (auto it = group_scan_.begin(); it != group_scan_.end();) {
          const bool open =
              std::any_of(list.namespaces().begin(), list.namespaces().end(),
                          [&](const auto& n) { return n.namespace_id() == it->first.first; });
          it = open ? std::next(it) : group_scan_.erase(it);
        }
      }
    }
    std::vector<const v1::NamespaceStatus*> all;
    struct TenantTotals {
      double namespaces = 0, blocks = 0, bytes = 0;
    };
    absl::flat_hash_map<std::string, TenantTotals> tenants;
    for (const v1::NamespaceStatus& ns : list.namespaces()) {
      all.push_back(&ns);
      TenantTotals& t = tenants[ns.tenant().empty() ? "none" : ns.tenant()];
      t.namespaces += 1;
      t.blocks += static_cast<double>(ns.blocks());
      t.bytes += static_cast<double>(ns.bytes());
    }
    std::sort(all.begin(), all.end(), [](const auto* a, const auto* b) {
      return a->bytes() != b->bytes() ? a->bytes() > b->bytes()
                                      : a->namespace_id() < b->namespace_id();
    });
    const size_t labelled = std::min<size_t>(all.size(), max_namespaces_);
    for (size_t i = 0; i < labelled; ++i) {
      const v1::NamespaceStatus& ns = *all[i];
      out->AddMessage(ns, "namespace_",
                      {{"namespace", ns.namespace_id()},
                       {"model", ns.model_id()},
                       {"tenant", ns.tenant().empty() ? "none" : ns.tenant()}});
      for (int g = 0; g < ns.groups_size(); ++g) {
        out->AddMessage(ns.groups(g), "namespace_group_",
                        {{"namespace", ns.namespace_id()},
                         {"group", std::to_string(g)},
                         {"kind", v1::LayerGroup::Kind_Name(ns.groups(g).kind())}});
      }
    }
    out->Add("kvtier_namespaces_unlabelled", prometheus::MetricType::Gauge,
             "Open namespaces beyond metrics.max_namespaces (the largest have their own series)",
             {}, static_cast<double>(all.size() - labelled));
    for (const auto& [tenant, t] : tenants) {
      const MetricLabels l = {{"tenant", tenant}};
      out->Add("kvtier_tenant_namespaces", prometheus::MetricType::Gauge,
               "Open namespaces per tenant", l, t.namespaces);
      out->Add("kvtier_tenant_blocks", prometheus::MetricType::Gauge,
               "Cached blocks per tenant, all tiers", l, t.blocks);
      out->Add("kvtier_tenant_bytes", prometheus::MetricType::Gauge,
               "Bytes of cached blocks per tenant, all tiers", l, t.bytes);
    }
  }

  AdminService* const admin_;
  const uint32_t max_namespaces_;
  mutable Mutex stranded_mu_;
  mutable absl::Time last_stranded_scan_ ABSL_GUARDED_BY(stranded_mu_) = absl::InfinitePast();
  // Each hybrid group's counts from the last scan, by (namespace, group).
  mutable std::map<std::pair<std::string, int>, v1::GroupStatus> group_scan_
      ABSL_GUARDED_BY(stranded_mu_);
  mutable uint64_t stranded_blocks_ ABSL_GUARDED_BY(stranded_mu_) = 0;
  mutable uint64_t stranded_bytes_ ABSL_GUARDED_BY(stranded_mu_) = 0;
};

DaemonMetrics::DaemonMetrics(AdminService* admin, const Authenticator* auth,
                             uint32_t max_namespaces)
    : registry_(std::make_shared<prometheus::Registry>()),
      rpc_(std::make_shared<RpcMetrics>(registry_.get(), auth)),
      views_(std::make_shared<AdminViewCollector>(admin, max_namespaces)) {}

DaemonMetrics::~DaemonMetrics() = default;

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
DaemonMetrics::InterceptorFactory() {
  return std::make_unique<RpcInterceptorFactory>(rpc_);
}

absl::Status DaemonMetrics::Listen(const std::string& address) {
  if (address == "off") return absl::OkStatus();
  if (address.rfind(':') == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics.listen '", address, "' is not host:port or off"));
  }
  MetricsHttpServerOptions options;
  options.address = address;
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsHttpServer> http,
                   MetricsHttpServer::Create(options, [this] { return Render(); }));
  http_ = std::move(http);
  address_ = http_->address();
  return absl::OkStatus();
}

std::string DaemonMetrics::Render() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::vector<prometheus::MetricFamily> views = views_->Collect();
  families.insert(families.end(), std::make_move_iterator(views.begin()),
                  std::make_move_iterator(views.end()));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace kvtier
