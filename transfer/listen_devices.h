// NetDevicesForListen: the network devices that own a gRPC listen address,
// in UCX_NET_DEVICES form, so that the peer transport is reachable on the
// same interfaces as the daemon's gRPC port and no others:
//   "127.0.0.1:50051", "[::1]:1", "localhost:1", "unix:/run/k.sock" -> "lo"
//   "192.0.2.2:50051" -> the interface holding 192.0.2.2 (e.g. "eth0")
//   "0.0.0.0:50051", "[::]:50051", ":50051" -> "all" (gRPC listens on every
//   interface)
// A loopback address names the loopback interface even when it is not the
// interface's own address (127.0.0.2). A name resolves to every interface
// owning one of its addresses.
//
// Thread-safety: safe to call from any thread.
#ifndef KVTIER_TRANSFER_LISTEN_DEVICES_H_
#define KVTIER_TRANSFER_LISTEN_DEVICES_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvtier {

// INVALID_ARGUMENT for an address without a host:port shape, NOT_FOUND when
// no interface of this machine owns the address.
absl::StatusOr<std::string> NetDevicesForListen(absl::string_view listen);

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_LISTEN_DEVICES_H_
