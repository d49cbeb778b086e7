#include "transfer/landing.h"

#include <algorithm>
#include <utility>

#include "transfer/transfer_steps.h"

namespace kvtier {

absl::StatusOr<Landing> PrepareLanding(BlockCache& cache, const NamespaceId& ns,
                                       absl::Span<const PeerBlockInfo> blocks) {
  Landing landing;
  if (cache.IsHybrid(ns)) {
    return absl::UnimplementedError(
        "the receiving daemon cannot land blocks of a namespace with layer groups (not supported "
        "yet)");
  }
  absl::StatusOr<std::unique_ptr<BlockCache::PutBatch>> batch = cache.BeginPut(ns);
  if (!batch.ok()) {
    return Annotate(batch.status(), "the receiving daemon cannot store this namespace: ");
  }
  landing.batch = *std::move(batch);
  for (const PeerBlockInfo& b : blocks) {
    absl::StatusOr<absl::Span<uint8_t>> slot =
        landing.batch->StartLanding(b.key, b.parent, b.size, b.checksum);
    if (!slot.ok()) {
      landing.refused = slot.status();
      break;
    }
    PeerBlockInfo placed = b;
    placed.already_cached = slot->empty();
    placed.address = slot->empty() ? 0 : reinterpret_cast<uint64_t>(slot->data());
    landing.slots.push_back(slot->empty() ? nullptr : slot->data());
    landing.blocks.push_back(std::move(placed));
  }
  return landing;
}

std::vector<absl::Status> FinishLanding(Landing& landing, size_t received) {
  const size_t n = landing.blocks.size();
  received = std::min(received, n);
  std::vector<absl::Status> out(n);
  size_t kept = landing.batch->KeepVerifiedPrefix(received);
  if (kept > 0) {
    absl::StatusOr<PutResult> committed = landing.batch->Commit();
    if (!committed.ok()) {
      for (auto& s : out) s = Annotate(committed.status(), "not stored on the receiver: ");
      return out;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (i < kept) {
      out[i] = absl::OkStatus();
    } else if (i == kept && kept < received) {
      out[i] =
          absl::DataLossError("the bytes received do not match the block's checksum; not stored");
    } else if (i == kept) {
      out[i] = absl::UnavailableError("the block's bytes did not arrive; not stored");
    } else {
      out[i] = absl::AbortedError("follows a block that was not stored");
    }
  }
  return out;
}

}  // namespace kvtier
