#include "transfer/peer_receiver.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "spdlog/spdlog.h"
#include "transfer/landing.h"
#include "transfer/landing_fill.h"
#include "transfer/transfer_steps.h"

namespace kvtier {

absl::StatusOr<TransferOutcome> PeerReceiver::Pull(const NamespaceId& ns,
                                                   absl::Span<const BlockKey> keys,
                                                   const std::string& target, absl::Time deadline) {
  if (absl::StatusOr<uint64_t> open = side_.cache->NamespaceBlockBytes(ns); !open.ok()) {
    return open.status();
  }
  TransferOutcome out;
  out.blocks.assign(keys.size(), absl::NotFoundError("not cached on the peer"));
  out.sizes.assign(keys.size(), 0);
  auto fail_from = [&](const absl::Status& s, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) out.blocks[i] = s;
  };
  absl::StatusOr<PeerLink> link = side_.peers->Connected(target, deadline);
  if (!link.ok()) {
    fail_from(link.status(), 0, keys.size());
    return out;
  }
  KnownPeer& peer = *link->peer;
  absl::StatusOr<ExportResult> exported =
      peer.channel->Export(ns, keys, HoldFor(deadline), deadline);
  if (!exported.ok()) {
    fail_from(Annotate(exported.status(), "the source refused the transfer: "), 0, keys.size());
    side_.peers->Record(peer, false, out, 0, FirstFailure(out.blocks));
    return out;
  }
  if (absl::Status same = side_.peers->CheckSameInstance(*link, exported->daemon_id); !same.ok()) {
    if (!exported->export_id.empty()) {
      (void)peer.channel->ReleaseExport(exported->export_id, CleanupDeadline(deadline));
    }
    fail_from(same, 0, keys.size());
    side_.peers->Record(peer, false, out, 0, same);
    return out;
  }
  size_t m = std::min(exported->blocks.size(), keys.size());
  for (size_t i = 0; i < m; ++i) {
    if (exported->blocks[i].key != keys[i]) {
      fail_from(absl::InternalError("the source exported a different block"), i, keys.size());
      m = i;
      break;
    }
    out.sizes[i] = exported->blocks[i].size;
  }
  absl::StatusOr<Landing> landing =
      PrepareLanding(*side_.cache, ns, absl::MakeConstSpan(exported->blocks).subspan(0, m));
  if (!landing.ok()) {
    if (!exported->export_id.empty()) {
      (void)peer.channel->ReleaseExport(exported->export_id, CleanupDeadline(deadline));
    }
    return landing.status();
  }
  const size_t k = landing->blocks.size();
  if (k < m) {
    out.blocks[k] = Annotate(landing->refused, "this daemon could not take the block: ");
    fail_from(absl::AbortedError("follows a block that was not transferred"), k + 1, m);
  }
  std::vector<RmaOp> ops;
  std::vector<size_t> op_block;
  for (size_t i = 0; i < k; ++i) {
    if (landing->slots[i] == nullptr) continue;
    ops.push_back({landing->slots[i], exported->blocks[i].address, exported->blocks[i].size});
    op_block.push_back(i);
  }
  Moved moved = Move(*side_.transport, link->connection, RmaKind::kGet, ops, op_block, k, deadline);
  out.bytes_moved = moved.bytes;
  out.transport_seconds = moved.seconds;
  out.lanes = side_.transport->Describe(link->connection).lanes;
  std::vector<absl::Status> landed = FinishLanding(*landing, moved.received);
  for (size_t i = 0; i < k; ++i) {
    out.blocks[i] = (i == moved.received && !moved.error.ok())
                        ? Annotate(moved.error, "fetching the block failed: ")
                        : landed[i];
  }
  if (!exported->export_id.empty()) {
    absl::Status released =
        peer.channel->ReleaseExport(exported->export_id, CleanupDeadline(deadline));
    if (!released.ok()) {
      spdlog::warn("peer {} did not release export {}: {} (it lapses on its own)", target,
                   exported->export_id, released.ToString());
    }
  }
  side_.peers->Record(peer, false, out, CountOk(out.blocks), FirstFailure(out.blocks));
  return out;
}

absl::StatusOr<PeerReceiver::Staged> PeerReceiver::Stage(const NamespaceId& ns,
                                                         absl::Span<const PeerBlockInfo> blocks,
                                                         absl::Duration ttl) {
  ASSIGN_OR_RETURN(Landing landing, PrepareLanding(*side_.cache, ns, blocks));
  // Before the sender learns the slots: what they held must not verify.
  FillLandingSlots(landing.slots, landing.blocks);
  Staged out;
  out.result.daemon_id = side_.daemon_id;
  out.result.blocks = landing.blocks;
  out.result.refused = landing.refused;
  if (landing.blocks.empty()) return out;
  out.entry = std::make_unique<StageEntry>();
  out.entry->landing = std::move(landing);
  out.entry->expiry = absl::Now() + std::clamp(ttl, absl::Seconds(1), side_.max_hold);
  return out;
}

std::vector<absl::Status> PeerReceiver::Commit(StageEntry& entry, uint32_t received) {
  return FinishLanding(entry.landing, received);
}

}  // namespace kvtier
