#include "server/peer_setup.h"

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "transfer/listen_devices.h"
#include "transfer/transport_factory.h"

namespace kvtier {

bool PeerTransferConfigured(const DaemonConfig& c) {
  return c.peer_transport == "ucx" || c.peer_role != "both" || !c.peer_allowed.empty() ||
         c.peer_net_devices != "auto" || !c.cluster_etcd.empty();
}

absl::StatusOr<std::unique_ptr<Transport>> ChoosePeerTransport(const DaemonConfig& config,
                                                               std::unique_ptr<Transport> seam,
                                                               std::string* unavailable_reason) {
  if (config.peer_transport == "off") {
    *unavailable_reason = "peer transfer is off (peer.transport: off)";
    return nullptr;
  }
  if (seam != nullptr) return seam;
  const bool explicit_ucx = config.peer_transport == "ucx";
  // A build without a backend keeps saying so: nothing could turn it on.
  if (!PeerTransferConfigured(config) && *TransportBackendName() != '\0') {
    *unavailable_reason =
        "peer transfer is off: no peer configuration (set peer.transport: ucx, peer.role or "
        "peer.allowed to turn it on)";
    return nullptr;
  }
  auto fail = [&](const absl::Status& s) -> absl::StatusOr<std::unique_ptr<Transport>> {
    if (explicit_ucx) {
      return absl::FailedPreconditionError(absl::StrCat("peer.transport is ucx but ", s.message()));
    }
    *unavailable_reason = std::string(s.message());
    return nullptr;
  };
  TransportOptions options;
  if (config.peer_net_devices != "auto") {
    options.net_devices = config.peer_net_devices;
  } else if (const char* env = std::getenv("UCX_NET_DEVICES"); env == nullptr || *env == '\0') {
    absl::StatusOr<std::string> devices = NetDevicesForListen(config.listen);
    if (!devices.ok()) {
      return fail(absl::FailedPreconditionError(
          absl::StrCat("peer.net_devices is auto and ", devices.status().message(),
                       " (server.listen '", config.listen, "'); set peer.net_devices")));
    }
    options.net_devices = *std::move(devices);
  }
  absl::StatusOr<std::unique_ptr<Transport>> t = CreateTransport(options);
  if (!t.ok()) return fail(t.status());
  return t;
}

}  // namespace kvtier
