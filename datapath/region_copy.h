// Save and Load through a registered MemoryRegion: blocks are copied between
// the region and the BlockCache, with an outcome per block.
//  - Save commits in groups of kGroup blocks (each group all-or-nothing, as a
//    Put); a group that fails reports its error for the failing block and
//    ABORTED for the others and every later block.
//  - Load reads groups of blocks (pinned by BlockCache::Read), copies each
//    into the region, hashing each piece of the pinned block as it copies it
//    (base/hashed_copy.h: CopyAndHash), and reports OK only when the bytes
//    copied match the block's checksum; a block that cannot be read (not
//    cached), fails verification (it is dropped, as a Get would) or does not
//    fit its room gets its own error, and the rest still load. The engine
//    must not write the destination meanwhile: such writes are not checked,
//    except for decoded (fp8) blocks, which are compared after the copy and
//    reported ABORTED (dropping nothing) when they differ.
// Outcomes are delivered in request order through `done`; it returns false
// when nobody listens any more (the copy stops, CANCELLED).
// Groups of at least kTwoThreadGroupBytes between the host tier and a host
// region are copied on two threads: the caller's and one of `workers`
// (copy_workers.h; the daemon keeps one set), or without them a thread
// started per group.
//
// Thread-safety: stateless functions; the cache and table are thread-safe.
// The region's bytes belong to the engine: concurrent writes by the engine
// to a range being saved or loaded give it whatever it raced with, but the
// cache's own copy and checksum always agree.
#ifndef KVTIER_DATAPATH_REGION_COPY_H_
#define KVTIER_DATAPATH_REGION_COPY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "datapath/copy_engine.h"
#include "datapath/copy_workers.h"
#include "datapath/gpu_tier.h"
#include "datapath/memory_region.h"
#include "encoding/block_transform.h"
#include "storage/block_cache.h"
#include "storage/block_key.h"

namespace kvtier {

struct RegionRange {
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct RegionBlock {
  BlockKey key;
  BlockKey parent;  // Save only
  uint64_t offset = 0;
  uint64_t size = 0;  // Save: the block's size; Load: the room at offset
  // When not empty, replaces offset/size: the block is these pieces in
  // order (Save gathers them, Load scatters over them).
  std::vector<RegionRange> segments;
  // The layer group of a hybrid namespace the block belongs to (0 otherwise).
  uint32_t group = 0;

  // The pieces: `segments`, or the one range (offset, size).
  std::vector<RegionRange> Ranges() const {
    return segments.empty() ? std::vector<RegionRange>{{offset, size}} : segments;
  }
  uint64_t TotalSize() const {
    uint64_t n = 0;
    for (const RegionRange& r : Ranges()) n += r.size;
    return n;
  }
};

inline constexpr size_t kMaxSegmentsPerBlock = 1024;

struct BlockOutcome {
  uint32_t index = 0;
  absl::Status status;
  uint64_t bytes = 0;  // stored or copied
};

using OutcomeSink = std::function<bool(const BlockOutcome&)>;
// Asked before each block is touched; false stops the copy (CANCELLED).
using KeepGoing = std::function<bool()>;

inline constexpr uint32_t kRegionCopyGroup = 64;

// INVALID_ARGUMENT (naming blocks[i]) unless every range lies in a region of
// `region_size` bytes with size > 0, a block has at most
// kMaxSegmentsPerBlock pieces, and, for destinations, no two ranges overlap.
absl::Status ValidateRegionBlocks(absl::Span<const RegionBlock> blocks, uint64_t region_size,
                                  bool destinations);

// Request-level errors (unknown namespace, bad ranges) return before any
// block is touched; otherwise every block gets exactly one outcome (unless
// `done` stops the copy) and the result is OK or CANCELLED.
//
// Device regions (MemoryKind::kDevice) are copied through `engine`, one batch
// per group: Save gathers a group's pieces into host staging and stores from
// there; Load verifies each block's checksum in the cache (as Get does) and
// scatters the group into the region in one batch, which is OK for every
// block or fails for every block of the batch with the engine's error
// (never a false OK). Staging is bounded by kDeviceStagingBytes per group.
// FAILED_PRECONDITION for a device region without an engine that reaches
// device memory.
//
// `retention`: the engine's retention priority for the saved blocks
// (BlockCache::PutBatch::set_retention); nullopt for the defaults.
//
// With a `transform` (the namespace's storage encoding), Save takes whole
// plain blocks only (INVALID_ARGUMENT otherwise) and stores their encoding;
// Load verifies the stored block in the cache, decodes it and copies the
// plain block (a block that does not decode is DATA_LOSS).
absl::Status SaveFromRegion(
    BlockCache& cache, const NamespaceId& ns, MemoryRegion& region,
    absl::Span<const RegionBlock> blocks, const OutcomeSink& done,
    const KeepGoing& keep_going = [] { return true; }, CopyEngine* engine = nullptr,
    BlockTransform* transform = nullptr, std::optional<uint8_t> retention = std::nullopt,
    CopyWorkers* workers = nullptr);
//
// With a `gpu_tier` on the device of a GPU region, Load copies blocks the
// tier holds (with their current checksum) device to device, and promotes
// the blocks it copies from the host into the tier in the same batch.
absl::Status LoadIntoRegion(
    BlockCache& cache, const NamespaceId& ns, MemoryRegion& region,
    absl::Span<const RegionBlock> blocks, const OutcomeSink& done,
    const KeepGoing& keep_going = [] { return true; }, CopyEngine* engine = nullptr,
    BlockTransform* transform = nullptr, GpuTier* gpu_tier = nullptr,
    CopyWorkers* workers = nullptr);

inline constexpr uint64_t kDeviceStagingBytes = uint64_t{32} << 20;

}  // namespace kvtier

#endif  // KVTIER_DATAPATH_REGION_COPY_H_
