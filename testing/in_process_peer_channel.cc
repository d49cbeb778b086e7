#include "testing/in_process_peer_channel.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kvtier {

void InProcessPeers::Place(const std::string& address, PeerTransfer* transfer) {
  MutexLock lock(&mu_);
  at_[address] = transfer;
}

void InProcessPeers::Remove(const std::string& address) {
  MutexLock lock(&mu_);
  at_.erase(address);
}

PeerTransfer* InProcessPeers::At(const std::string& address) {
  MutexLock lock(&mu_);
  auto it = at_.find(address);
  return it == at_.end() ? nullptr : it->second;
}

uint64_t InProcessPeers::calls() {
  MutexLock lock(&mu_);
  return calls_;
}

PeerTransfer* InProcessPeers::Call(const std::string& address) {
  MutexLock lock(&mu_);
  ++calls_;
  auto it = at_.find(address);
  return it == at_.end() ? nullptr : it->second;
}

PeerChannelFactory InProcessPeers::factory() {
  return [this](const std::string& target) -> std::unique_ptr<PeerChannel> {
    return std::make_unique<InProcessPeerChannel>(this, target);
  };
}

absl::Status InProcessPeerChannel::Unreachable() const {
  return absl::UnavailableError(absl::StrCat("no daemon answers at ", address_));
}

absl::StatusOr<PeerHello> InProcessPeerChannel::Hello(const std::string& caller_id, absl::Time) {
  PeerTransfer* t = peers_->Call(address_);
  if (t == nullptr) return Unreachable();
  return t->Hello(caller_id);
}

absl::StatusOr<StageResult> InProcessPeerChannel::Stage(const NamespaceId& ns,
                                                        absl::Span<const PeerBlockInfo> blocks,
                                                        absl::Duration ttl, absl::Time) {
  PeerTransfer* t = peers_->Call(address_);
  if (t == nullptr) return Unreachable();
  return t->Stage(ns, std::vector<PeerBlockInfo>(blocks.begin(), blocks.end()), ttl);
}

absl::StatusOr<std::vector<absl::Status>> InProcessPeerChannel::Commit(const std::string& stage_id,
                                                                       uint32_t received,
                                                                       absl::Time) {
  PeerTransfer* t = peers_->Call(address_);
  if (t == nullptr) return Unreachable();
  return t->Commit(stage_id, received);
}

absl::StatusOr<ExportResult> InProcessPeerChannel::Export(const NamespaceId& ns,
                                                          absl::Span<const BlockKey> keys,
                                                          absl::Duration ttl, absl::Time) {
  PeerTransfer* t = peers_->Call(address_);
  if (t == nullptr) return Unreachable();
  return t->Export(ns, keys, ttl);
}

absl::Status InProcessPeerChannel::ReleaseExport(const std::string& export_id, absl::Time) {
  PeerTransfer* t = peers_->Call(address_);
  if (t == nullptr) return Unreachable();
  return t->ReleaseExport(export_id);
}

}  // namespace kvtier
