// DaemonMetrics: kvtierd's Prometheus endpoint (prometheus-cpp metrics), by default
// http://127.0.0.1:9400/metrics (metrics.listen). It serves
//   - at each scrape, every number of the Admin views (status, tiers,
//     namespaces, wear, peers) through MetricFamilies: storage engine and
//     data path counters, tier occupancy, planner decisions, transfers, wear;
//     namespaces labelled {namespace, model, tenant} for the largest
//     metrics.max_namespaces of them, and per-tenant totals;
//   - per RPC, from a gRPC server interceptor (installed only when metrics
//     are served): kvtier_rpc_requests_total
//     {service, method, code, tenant} and the latency histogram
//     kvtier_rpc_duration_seconds{service, method}. Tenant labels are those
//     of the identities file (at most 64 distinct values; more read "other").
//
// Thread-safety: thread-safe. Create before the gRPC server is built (its
// interceptor goes into the builder), Listen after it started.
#ifndef KVTIER_SERVER_DAEMON_METRICS_H_
#define KVTIER_SERVER_DAEMON_METRICS_H_

#include <grpcpp/support/server_interceptor.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/admin_service.h"
#include "server/auth.h"
#include "server/metrics_http_server.h"

namespace kvtier {

class RpcMetrics;
class AdminViewCollector;

class DaemonMetrics {
 public:
  // `admin` and `auth` must outlive this object.
  DaemonMetrics(AdminService* admin, const Authenticator* auth, uint32_t max_namespaces);
  ~DaemonMetrics();
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  // For grpc::ServerBuilder::experimental().SetInterceptorCreators.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

  // Serves /metrics on "host:port" (port 0 picks one) from an event-driven
  // HTTP server (server/metrics_http_server.h: slow clients cannot stall a
  // scrape). UNAVAILABLE when the address cannot be bound. "off" serves
  // nothing.
  absl::Status Listen(const std::string& address);
  // "127.0.0.1:9400" once listening; "" otherwise.
  const std::string& address() const { return address_; }

  // What a scrape would read, in the text exposition format.
  std::string Render() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<RpcMetrics> rpc_;
  std::shared_ptr<AdminViewCollector> views_;
  std::string address_;
  std::unique_ptr<MetricsHttpServer> http_;  // last: stopped first, before what it reads
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_DAEMON_METRICS_H_
