#include "transfer/peer_transfer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "spdlog/spdlog.h"
#include "transfer/transfer_steps.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<PeerTransfer>> PeerTransfer::Create(
    BlockCache* cache, std::unique_ptr<Transport> transport, std::string unavailable_reason,
    PeerChannelFactory channels, PeerTransferOptions options) {
  std::unique_ptr<PeerTransfer> p(new PeerTransfer(
      cache, std::move(transport), std::move(unavailable_reason), std::move(channels), options));
  if (p->transport_ != nullptr) {
    absl::Span<uint8_t> arena = cache->host_arena();
    absl::StatusOr<ExposedMemory> exposed = p->transport_->Expose(arena);
    if (!exposed.ok()) return Annotate(exposed.status(), "exposing the host arena to peers: ");
    p->exposed_ = *std::move(exposed);
  }
  return p;
}

PeerTransfer::PeerTransfer(BlockCache* cache, std::unique_ptr<Transport> transport,
                           std::string unavailable_reason, PeerChannelFactory channels,
                           PeerTransferOptions options)
    : cache_(cache),
      transport_(std::move(transport)),
      unavailable_reason_(std::move(unavailable_reason)),
      options_(std::move(options)),
      pending_(options_.max_pending),
      daemon_id_(NewId()),
      peers_(transport_.get(), std::move(channels), daemon_id_),
      source_({cache, transport_.get(), &peers_, daemon_id_, options_.max_hold}),
      receiver_({cache, transport_.get(), &peers_, daemon_id_, options_.max_hold}) {}

PeerTransfer::~PeerTransfer() {
  // The transport first: once it is gone no peer operation can touch the
  // arena, and then the slots and pins held for peers are let go.
  transport_.reset();
  MutexLock lock(&mu_);
  pending_.Clear();
}

std::string PeerTransfer::NewId() {
  MutexLock lock(&mu_);
  const uint64_t a = absl::Uniform<uint64_t>(bitgen_);
  const uint64_t b = absl::Uniform<uint64_t>(bitgen_);
  return absl::StrCat(absl::Hex(a, absl::kZeroPad16), absl::Hex(b, absl::kZeroPad16));
}

absl::Status PeerTransfer::CheckUsable(bool as_source, absl::Span<const BlockKey> keys,
                                       const std::string& peer) const {
  if (transport_ == nullptr) return absl::UnavailableError(unavailable_reason_);
  if (as_source && !IsSource(options_.role)) {
    return absl::FailedPreconditionError(
        "this daemon's peer.role is decode: it receives blocks and cannot send them");
  }
  if (!as_source && !IsReceiver(options_.role)) {
    return absl::FailedPreconditionError(
        "this daemon's peer.role is prefill: it sends blocks and cannot receive them");
  }
  if (keys.empty() || keys.size() > options_.max_keys) {
    return absl::InvalidArgumentError(
        absl::StrCat("a transfer takes 1..", options_.max_keys, " keys, not ", keys.size()));
  }
  if (peer.empty()) return absl::InvalidArgumentError("no peer address given");
  if (!options_.allowed_peers.empty() &&
      std::find(options_.allowed_peers.begin(), options_.allowed_peers.end(), peer) ==
          options_.allowed_peers.end()) {
    return absl::PermissionDeniedError(
        absl::StrCat("peer '", peer.substr(0, 200), "' is not in peer.allowed"));
  }
  return absl::OkStatus();
}

absl::Time PeerTransfer::DeadlineFor(absl::Duration timeout) const {
  return absl::Now() + (timeout > absl::ZeroDuration() ? timeout : options_.timeout);
}

absl::StatusOr<TransferOutcome> PeerTransfer::Push(const NamespaceId& ns,
                                                   absl::Span<const BlockKey> keys,
                                                   const std::string& target,
                                                   absl::Duration timeout) {
  RETURN_IF_ERROR(CheckUsable(true, keys, target));
  return source_.Push(ns, keys, target, DeadlineFor(timeout));
}

absl::StatusOr<TransferOutcome> PeerTransfer::Pull(const NamespaceId& ns,
                                                   absl::Span<const BlockKey> keys,
                                                   const std::string& target,
                                                   absl::Duration timeout) {
  RETURN_IF_ERROR(CheckUsable(false, keys, target));
  return receiver_.Pull(ns, keys, target, DeadlineFor(timeout));
}

absl::StatusOr<StageResult> PeerTransfer::Stage(const NamespaceId& ns,
                                                std::vector<PeerBlockInfo> blocks,
                                                absl::Duration ttl) {
  if (transport_ == nullptr) return absl::UnavailableError(unavailable_reason_);
  if (!IsReceiver(options_.role)) {
    return absl::FailedPreconditionError("this daemon's peer.role is prefill: it takes no blocks");
  }
  if (blocks.empty() || blocks.size() > options_.max_keys) {
    return absl::InvalidArgumentError(
        absl::StrCat("a stage takes 1..", options_.max_keys, " blocks, not ", blocks.size()));
  }
  ExpireStale();
  if (pending() >= options_.max_pending) return TooManyPending();
  ASSIGN_OR_RETURN(PeerReceiver::Staged staged, receiver_.Stage(ns, blocks, ttl));
  if (staged.entry == nullptr) return std::move(staged.result);
  staged.result.stage_id = NewId();
  std::unique_ptr<StageEntry> refused;
  {
    MutexLock lock(&mu_);
    refused = pending_.AddStage(staged.result.stage_id, std::move(staged.entry));
    if (refused == nullptr) return std::move(staged.result);
  }
  return TooManyPending();  // `refused` frees its slots outside the lock
}

absl::StatusOr<std::vector<absl::Status>> PeerTransfer::Commit(const std::string& stage_id,
                                                               uint32_t received) {
  std::unique_ptr<StageEntry> entry;
  {
    MutexLock lock(&mu_);
    entry = pending_.TakeStage(stage_id);
    if (entry == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("no pending stage '", stage_id, "' (unknown, or it expired)"));
    }
  }
  std::vector<absl::Status> statuses = receiver_.Commit(*entry, received);
  if (entry->landing.batch->held_slots() > 0) {
    // Blocks the sender did not complete: it may still have bytes in flight
    // toward their slots, so they are not handed to other blocks yet.
    MutexLock lock(&mu_);
    pending_.Quarantine(absl::Now() + options_.quarantine, std::move(entry->landing.batch));
  }
  return statuses;
}

absl::StatusOr<ExportResult> PeerTransfer::Export(const NamespaceId& ns,
                                                  absl::Span<const BlockKey> keys,
                                                  absl::Duration ttl) {
  if (transport_ == nullptr) return absl::UnavailableError(unavailable_reason_);
  if (!IsSource(options_.role)) {
    return absl::FailedPreconditionError("this daemon's peer.role is decode: it sends no blocks");
  }
  if (keys.empty() || keys.size() > options_.max_keys) {
    return absl::InvalidArgumentError(
        absl::StrCat("an export takes 1..", options_.max_keys, " keys, not ", keys.size()));
  }
  ExpireStale();
  if (pending() >= options_.max_pending) return TooManyPending();
  ASSIGN_OR_RETURN(PeerSource::Exported exported, source_.Export(ns, keys, ttl));
  if (exported.entry == nullptr) return std::move(exported.result);
  exported.result.export_id = NewId();
  std::unique_ptr<ExportEntry> refused;
  {
    MutexLock lock(&mu_);
    refused = pending_.AddExport(exported.result.export_id, std::move(exported.entry));
    if (refused == nullptr) return std::move(exported.result);
  }
  return TooManyPending();  // `refused` unpins outside the lock
}

absl::Status PeerTransfer::ReleaseExport(const std::string& export_id) {
  std::unique_ptr<ExportEntry> entry;  // unpinned after the lock is let go
  MutexLock lock(&mu_);
  entry = pending_.TakeExport(export_id);
  if (entry == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no pending export '", export_id, "' (unknown, or it expired)"));
  }
  return absl::OkStatus();
}

void PeerTransfer::ExpireStale() {
  PendingTable::Expired expired;  // let go after the lock
  const absl::Time now = absl::Now();
  {
    MutexLock lock(&mu_);
    expired = pending_.TakeExpired(now);
  }
  if (!expired.stages.empty() || !expired.exports.empty()) {
    spdlog::warn("dropped {} stages and {} exports that their peers never finished",
                 expired.stages.size(), expired.exports.size());
  }
}

absl::Status PeerTransfer::TooManyPending() const {
  return absl::ResourceExhaustedError(
      absl::StrCat(options_.max_pending, " transfers are already pending on this daemon"));
}

size_t PeerTransfer::pending() {
  MutexLock lock(&mu_);
  return pending_.size();
}

std::vector<PeerStats> PeerTransfer::Peers() { return peers_.Peers(); }

}  // namespace kvtier
