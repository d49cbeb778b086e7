// EtcdGatewayClient: EtcdClient over etcd's v3 JSON gateway (the HTTP/JSON
// mapping of etcd's gRPC API that every etcd server serves on its client
// URL: POST /v3/kv/put, /v3/kv/range, /v3/lease/grant, ...; keys and
// values base64, 64-bit integers as strings), through libcurl.
//
// Endpoints are tried in order, starting from the last one that answered;
// a call that no endpoint answers within `timeout` each is UNAVAILABLE.
//
// Thread-safety: thread-safe (one connection, calls serialized: the
// cluster's traffic is a few small requests a second).
#ifndef KVTIER_CLUSTER_ETCD_GATEWAY_CLIENT_H_
#define KVTIER_CLUSTER_ETCD_GATEWAY_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "cluster/etcd_client.h"

namespace kvtier {

struct EtcdGatewayOptions {
  // "http://host:port" or "host:port" (http assumed). At least one.
  std::vector<std::string> endpoints;
  // Per request and endpoint: connect plus answer.
  absl::Duration timeout = absl::Seconds(1);
};

class EtcdGatewayClient final : public EtcdClient {
 public:
  // INVALID_ARGUMENT for no endpoints, a scheme other than http, or a
  // non-positive timeout. Does not contact etcd.
  static absl::StatusOr<std::unique_ptr<EtcdGatewayClient>> Create(EtcdGatewayOptions options);
  ~EtcdGatewayClient() override;

  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) override;
  absl::Status KeepAlive(int64_t lease) override;
  absl::Status RevokeLease(int64_t lease) override;
  absl::Status Put(absl::string_view key, absl::string_view value, int64_t lease) override;
  absl::StatusOr<std::vector<EtcdKeyValue>> GetPrefix(absl::string_view prefix) override;

 private:
  EtcdGatewayClient(std::vector<std::string> base_urls, absl::Duration timeout, void* curl);
  // POSTs `body` to `path` on the endpoints in turn; the answer's body on
  // HTTP 200, etcd's error (its gRPC code) on another answer.
  absl::StatusOr<std::string> Call(absl::string_view path, const std::string& body);

  const std::vector<std::string> base_urls_;
  const absl::Duration timeout_;
  Mutex mu_;
  void* curl_ ABSL_GUARDED_BY(mu_);  // CURL*, kept for its connection
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvtier

#endif  // KVTIER_CLUSTER_ETCD_GATEWAY_CLIENT_H_
