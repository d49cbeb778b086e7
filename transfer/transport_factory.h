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

struct TransportOptions {
  // Ask UCX to report failed peers (UCP_ERR_HANDLING_MODE_PEER). UCX 1.13
  // then uses only transports that can (tcp; not the shared-memory ones),
  // so turn it off to move bytes over shared memory between daemons on one
  // node; a dead peer is then noticed by the transfer deadline.
  bool detect_peer_failure = true;
};

absl::StatusOr<std::unique_ptr<Transport>> CreateTransport(const TransportOptions& options);

// Whether this binary was built with a transport backend ("ucx" or "").
const char* TransportBackendName();

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_TRANSPORT_FACTORY_H_
