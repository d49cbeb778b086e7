#include "transfer/peer_source.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/checksum.h"
#include "base/status_macros.h"
#include "transfer/transfer_steps.h"

namespace kvtier {

absl::StatusOr<TransferOutcome> PeerSource::Push(const NamespaceId& ns,
                                                 absl::Span<const BlockKey> keys,
                                                 const std::string& target, absl::Time deadline) {
  TransferOutcome out;
  out.blocks.assign(keys.size(), absl::NotFoundError("not cached on the source daemon"));
  out.sizes.assign(keys.size(), 0);
  ASSIGN_OR_RETURN(LookupResult found, side_.cache->Lookup(ns, keys, false, absl::ZeroDuration()));
  const size_t m = found.blocks.size();
  if (m == 0) return out;
  absl::StatusOr<std::vector<BlockCache::ReadHandle>> handles =
      side_.cache->Read(ns, keys.subspan(0, m), /*verify=*/false);
  if (!handles.ok()) {
    for (size_t i = 0; i < m; ++i) {
      out.blocks[i] = absl::AbortedError(
          absl::StrCat("the source's blocks changed during the transfer; retry (",
                       handles.status().message(), ")"));
    }
    return out;
  }
  std::vector<PeerBlockInfo> blocks(m);
  for (size_t i = 0; i < m; ++i) {
    const BlockCache::ReadHandle& h = (*handles)[i];
    blocks[i] = {h.key(), h.parent(), h.bytes().size(), h.checksum(), 0, false};
    out.sizes[i] = h.bytes().size();
  }
  auto fail_all = [&](const absl::Status& s, size_t from) {
    for (size_t i = from; i < m; ++i) out.blocks[i] = s;
  };
  absl::StatusOr<PeerLink> link = side_.peers->Connected(target, deadline);
  if (!link.ok()) {
    fail_all(link.status(), 0);
    return out;
  }
  KnownPeer& peer = *link->peer;
  absl::StatusOr<StageResult> stage = peer.channel->Stage(ns, blocks, HoldFor(deadline), deadline);
  if (!stage.ok()) {
    fail_all(Annotate(stage.status(), "the receiver refused the transfer: "), 0);
    side_.peers->Record(peer, true, out, 0, FirstFailure(out.blocks));
    return out;
  }
  if (absl::Status same = side_.peers->CheckSameInstance(*link, stage->daemon_id); !same.ok()) {
    // Its addresses belong to another arena than the connection reaches.
    if (!stage->stage_id.empty()) {
      (void)peer.channel->Commit(stage->stage_id, 0, CleanupDeadline(deadline));
    }
    fail_all(same, 0);
    side_.peers->Record(peer, true, out, 0, same);
    return out;
  }
  size_t k = std::min(stage->blocks.size(), m);
  if (k < m) {
    out.blocks[k] =
        Annotate(stage->refused.ok() ? absl::InternalError("no reason given") : stage->refused,
                 "the receiver could not take the block: ");
    fail_all(absl::AbortedError("follows a block that was not transferred"), k + 1);
  }
  std::vector<RmaOp> ops;
  std::vector<size_t> op_block;
  for (size_t i = 0; i < k; ++i) {
    const PeerBlockInfo& placed = stage->blocks[i];
    if (placed.key != blocks[i].key) {
      // A receiver that answers for other blocks than asked is broken; send
      // nothing from here on, and tell it nothing from here on arrived.
      fail_all(absl::InternalError("the receiver staged a different block"), i);
      k = i;
      break;
    }
    if (placed.already_cached) continue;
    // Put reads the buffer only; RmaOp's pointer serves both directions.
    ops.push_back(
        {const_cast<uint8_t*>((*handles)[i].bytes().data()), placed.address, blocks[i].size});
    op_block.push_back(i);
  }
  Moved moved = Move(*side_.transport, link->connection, RmaKind::kPut, ops, op_block, k, deadline);
  out.bytes_moved = moved.bytes;
  out.transport_seconds = moved.seconds;
  out.lanes = side_.transport->Describe(link->connection).lanes;
  if (!stage->stage_id.empty()) {
    absl::StatusOr<std::vector<absl::Status>> committed = peer.channel->Commit(
        stage->stage_id, static_cast<uint32_t>(moved.received), CleanupDeadline(deadline));
    if (!committed.ok() || committed->size() < k) {
      const absl::Status why =
          committed.ok() ? absl::InternalError("malformed Commit answer") : committed.status();
      for (size_t i = 0; i < k; ++i) {
        if (out.blocks[i].ok() || absl::IsNotFound(out.blocks[i])) {
          out.blocks[i] = Annotate(why, "the receiver did not confirm the block: ");
        }
      }
    } else {
      for (size_t i = 0; i < k; ++i) {
        if (i == moved.received && !moved.error.ok()) {
          out.blocks[i] = Annotate(moved.error, "sending the block failed: ");
        } else {
          out.blocks[i] = (*committed)[i];
        }
        if (absl::IsDataLoss(out.blocks[i])) {
          // Our copy may be the bad one: check it as any read would.
          const BlockCache::ReadHandle& h = (*handles)[i];
          if (Checksum64(h.bytes()) != h.checksum()) side_.cache->ReportChecksumMismatch(h);
        }
      }
    }
  }
  side_.peers->Record(peer, true, out, CountOk(out.blocks), FirstFailure(out.blocks));
  return out;
}

absl::StatusOr<PeerSource::Exported> PeerSource::Export(const NamespaceId& ns,
                                                        absl::Span<const BlockKey> keys,
                                                        absl::Duration ttl) {
  ASSIGN_OR_RETURN(LookupResult found, side_.cache->Lookup(ns, keys, false, absl::ZeroDuration()));
  Exported out;
  out.result.daemon_id = side_.daemon_id;
  const size_t m = found.blocks.size();
  if (m == 0) return out;
  // The receiver verifies every byte against the checksum, so no pass here.
  absl::StatusOr<std::vector<BlockCache::ReadHandle>> handles =
      side_.cache->Read(ns, keys.subspan(0, m), /*verify=*/false);
  if (!handles.ok()) {
    return absl::AbortedError(
        absl::StrCat("blocks changed during the export; retry (", handles.status().message(), ")"));
  }
  for (const BlockCache::ReadHandle& h : *handles) {
    out.result.blocks.push_back({h.key(), h.parent(), h.bytes().size(), h.checksum(),
                                 reinterpret_cast<uint64_t>(h.bytes().data()), false});
  }
  out.entry = std::make_unique<ExportEntry>();
  out.entry->handles = *std::move(handles);
  out.entry->expiry = absl::Now() + std::clamp(ttl, absl::Seconds(1), side_.max_hold);
  return out;
}

}  // namespace kvtier
