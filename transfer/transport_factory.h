// CreateTransport: the peer Transport this process should use. With a UCX
// build it is the UCX backend (transports from UCX's own environment,
// UCX_TLS / UCX_NET_DEVICES, except that TransportOptions::net_devices, when
// set, overrides UCX_NET_DEVICES); in a build without UCX it is UNAVAILABLE,
// and the daemon reports peer transfer as unavailable with that reason.
//
// Thread-safety: safe to call from any thread.
#ifndef KVTIER_TRANSFER_TRANSPORT_FACTORY_H_
#define KVTIER_TRANSFER_TRANSPORT_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "transfer/transport.h"

namespace kvtier {

struct TransportOptions {
  // The network devices the backend may use, in UCX_NET_DEVICES form ("lo",
  // "eth0,lo", "mlx5_0:1"); "" leaves it to UCX's environment (every device
  // when UCX_NET_DEVICES is unset).
  std::string net_devices;
};

absl::StatusOr<std::unique_ptr<Transport>> CreateTransport(const TransportOptions& options);
// CreateTransport with default options (devices from the environment).
absl::StatusOr<std::unique_ptr<Transport>> CreateTransport();

// Whether this binary was built with a transport backend ("ucx" or "").
const char* TransportBackendName();

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_TRANSPORT_FACTORY_H_
