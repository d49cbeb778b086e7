// CreateTransport: the peer Transport this process should use. With a UCX
// build it is the UCX backend (transports from UCX's own environment,
// UCX_TLS / UCX_NET_DEVICES); in a build without UCX it is UNAVAILABLE, and
// the daemon reports peer transfer as unavailable with that reason.
//
// Thread-safety: safe to call from any thread.
#ifndef KVTIER_TRANSFER_TRANSPORT_FACTORY_H_
#define KVTIER_TRANSFER_TRANSPORT_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "storage/transport.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<Transport>> CreateTransport();

// Whether this binary was built with a transport backend ("ucx" or "").
const char* TransportBackendName();

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_TRANSPORT_FACTORY_H_
