// ChoosePeerTransport: the peer Transport a daemon's configuration asks for
// (docs/operations.md, peer.* keys).
//  - peer.transport off, or auto with no peer configuration (peer.role
//    both, peer.allowed empty, peer.net_devices auto, cluster.etcd unset):
//    none, since a daemon nobody set up for transfer must not expose its
//    arena to peers (a cluster member moves blocks to and from the others);
//  - otherwise the backend (UCX), restricted to peer.net_devices: with
//    auto, UCX_NET_DEVICES when the environment sets it, else the interface
//    that owns server.listen's address (lo for 127.0.0.1), so the transport
//    is reachable exactly where the gRPC port is.
// A transport given by the caller (a test's seam) is used unless
// peer.transport is off.
//
// Thread-safety: safe to call from any thread.
#ifndef KVTIER_SERVER_PEER_SETUP_H_
#define KVTIER_SERVER_PEER_SETUP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/config.h"
#include "transfer/transport.h"

namespace kvtier {

// Whether any peer.* key asks for transfer (see above).
bool PeerTransferConfigured(const DaemonConfig& config);

// Null, with `*unavailable_reason` set, when there is no transport;
// FAILED_PRECONDITION when peer.transport is ucx and it cannot start (the
// message names the key).
absl::StatusOr<std::unique_ptr<Transport>> ChoosePeerTransport(const DaemonConfig& config,
                                                               std::unique_ptr<Transport> seam,
                                                               std::string* unavailable_reason);

}  // namespace kvtier

#endif  // KVTIER_SERVER_PEER_SETUP_H_
