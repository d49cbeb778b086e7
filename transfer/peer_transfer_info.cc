// PeerTransfer's self-description: Info (kvtier status) and Hello (what a
// peer needs to connect). Split from peer_transfer.cc to keep files small.
#include "spdlog/spdlog.h"
#include "transfer/peer_transfer.h"

namespace kvtier {

PeerTransferInfo PeerTransfer::Info() const {
  PeerTransferInfo info;
  info.available = transport_ != nullptr;
  info.detail = unavailable_reason_;
  info.role = options_.role;
  if (transport_ != nullptr) info.transport = transport_->Capabilities();
  return info;
}

absl::StatusOr<PeerHello> PeerTransfer::Hello(const std::string& caller_id) {
  // Without a transport there is no arena exposed and nothing to hand out.
  if (transport_ == nullptr) return absl::UnavailableError(unavailable_reason_);
  spdlog::debug("peer hello from daemon {}", caller_id);
  PeerHello hello;
  hello.daemon_id = daemon_id_;
  hello.role = PeerRoleName(options_.role);
  hello.transport_address = transport_->LocalAddress();
  hello.memory = exposed_;
  const TransportCapabilities caps = transport_->Capabilities();
  hello.transport = caps.name;
  hello.transports = caps.transports;
  hello.net_devices = caps.net_devices;
  return hello;
}

}  // namespace kvtier
