// SaveFromRegion: blocks copied (gathered) out of a client region into the cache.
#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/checksum.h"
#include "base/sigbus_guard.h"
#include "base/status_macros.h"
#include "datapath/gpu_tier.h"
#include "datapath/region_copy.h"
#include "datapath/region_groups.h"

namespace kvtier {
namespace {

// Copies blocks [next, end) of a host region into their slots of `batch`,
// hashing each copy while it is in cache, on two threads (this thread and a
// helper, each taking the next block not yet taken; each touches only its
// own blocks' slots and results). The batch is only touched here, before and after.
// On an error returns it and sets *failed_at to the first failed block.
absl::Status FillOnTwoThreads(CopyWorkers* workers, BlockCache::PutBatch& batch,
                              absl::Span<const RegionBlock> blocks, size_t next, size_t end,
                              const uint8_t* host_base, uint64_t region_size, size_t* failed_at) {
  const size_t first = batch.blocks();
  std::vector<absl::Span<uint8_t>> slots;
  for (size_t i = next; i < end; ++i) {
    const RegionBlock& b = blocks[i];
    absl::StatusOr<absl::Span<uint8_t>> slot =
        batch.StartFill(b.key, b.parent, b.TotalSize(), b.group);
    if (!slot.ok()) {
      *failed_at = i;
      return slot.status();
    }
    slots.push_back(*slot);
  }
  std::vector<uint64_t> checksums(end - next, 0);
  std::vector<char> vanished(end - next, 0);
  Checksum64Stream hashes[2];
  ForEachOnTwoThreads(workers, end - next, [&](size_t part, size_t k) {
    if (slots[k].empty()) return;  // already cached
    Checksum64Stream& hash = hashes[part];
    hash.Reset();
    uint64_t at = 0;
    for (const RegionRange& r : blocks[next + k].Ranges()) {
      for (uint64_t done = 0; done < r.size && !vanished[k]; done += BlockCache::kCopyChunk) {
        const size_t n = std::min<uint64_t>(BlockCache::kCopyChunk, r.size - done);
        vanished[k] = !GuardedCopyAndHash(slots[k].data() + at + done, host_base + r.offset + done,
                                          n, hash, host_base, region_size);
      }
      at += r.size;
    }
    if (!vanished[k]) checksums[k] = hash.Digest();
  });
  for (size_t k = 0; k < end - next; ++k) {
    absl::Status st = vanished[k] ? VanishedMemoryError(absl::StrCat("blocks[", next + k, "]"))
                                  : batch.Filled(first + k, checksums[k]);
    if (!st.ok()) {
      *failed_at = next + k;
      return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SaveFromRegion(BlockCache& cache, const NamespaceId& ns, MemoryRegion& region,
                            absl::Span<const RegionBlock> blocks, const OutcomeSink& done,
                            const KeepGoing& keep_going, CopyEngine* engine,
                            BlockTransform* transform, std::optional<uint8_t> retention,
                            CopyWorkers* workers) {
  RETURN_IF_ERROR(ValidateRegionBlocks(blocks, region.size(), false));
  RETURN_IF_ERROR(CheckDeviceAccess(region, blocks, engine));
  // A hybrid namespace's Save is judged whole: its batches' attention blocks
  // may become usable only with a later batch's snapshot.
  const std::unique_ptr<BlockCache::DeferredSweep> whole = cache.DeferSweeps(ns);
  const bool device = region.kind() == MemoryKind::kDevice;
  // Host regions are read in place, unless blocks are encoded; device
  // regions, and blocks to encode, go through `staging`.
  const bool stage = device || transform != nullptr;
  uint8_t* const host_base = device ? nullptr : *region.Address(0, region.size());
  std::vector<uint8_t> staging, encoded(transform ? transform->stored_bytes() : 0);
  if (transform != nullptr) {
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (blocks[i].TotalSize() != transform->plain_bytes()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "blocks[", i, "]: ", blocks[i].TotalSize(), " bytes; this namespace stores ",
            transform->Describe(), ", which takes whole blocks of ", transform->plain_bytes()));
      }
    }
  }
  // An unknown namespace or a block too large for it is a request error:
  // nothing is attempted.
  ASSIGN_OR_RETURN(uint64_t block_bytes, cache.NamespaceBlockBytes(ns));
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].TotalSize() > block_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("blocks[", i, "]: ", blocks[i].TotalSize(),
                                                     " bytes exceed the namespace's ", block_bytes,
                                                     "-byte blocks"));
    }
  }
  size_t next = 0;
  absl::Status failure;
  while (next < blocks.size()) {
    const size_t end = GroupEnd(blocks, next, stage);
    if (!keep_going()) return absl::CancelledError("Save abandoned by its caller");
    absl::Status group = absl::OkStatus();
    size_t failed_at = end;
    if (stage) {
      // Gather the group's pieces: out of GPU memory in one batch, or by
      // memcpy from host memory.
      CopyBatch gather{
          device ? MemoryKind::kDevice : MemoryKind::kHost, MemoryKind::kHost, region.device(), {}};
      uint64_t at = 0;
      for (size_t i = next; i < end; ++i) at += blocks[i].TotalSize();
      staging.resize(at);
      at = 0;
      for (size_t i = next; i < end; ++i) {
        for (const RegionRange& r : blocks[i].Ranges()) {
          gather.ops.push_back({staging.data() + at, *region.Address(r.offset, r.size), r.size});
          at += r.size;
        }
      }
      if (device) {
        group = engine->CopySync(std::move(gather));
        if (!group.ok()) failed_at = next;
      } else {
        for (const CopyOp& op : gather.ops) {
          if (!GuardedCopy(op.dst, op.src, op.bytes, host_base, region.size())) {
            group = VanishedMemoryError(absl::StrCat("blocks[", next, "]"));
            failed_at = next;
            break;
          }
        }
      }
    }
    absl::StatusOr<std::unique_ptr<BlockCache::PutBatch>> batch = cache.BeginPut(ns, whole.get());
    if (group.ok() && !batch.ok()) {
      group = batch.status();
      failed_at = next;
    }
    if (batch.ok()) (*batch)->set_retention(retention);
    uint64_t group_bytes = 0;
    for (size_t i = next; i < end; ++i) group_bytes += blocks[i].TotalSize();
    const bool two_threads = !stage && end - next >= 2 && group_bytes >= kTwoThreadGroupBytes;
    if (group.ok() && two_threads) {
      group = FillOnTwoThreads(workers, **batch, blocks, next, end, host_base, region.size(),
                               &failed_at);
    }
    uint64_t staged = 0;
    for (size_t i = next; group.ok() && !two_threads && i < end; ++i) {
      const RegionBlock& b = blocks[i];
      if (transform != nullptr) {
        group = transform->Encode(absl::MakeConstSpan(staging.data() + staged, b.TotalSize()),
                                  absl::MakeSpan(encoded));
        if (group.ok()) group = (*batch)->StartBlock(b.key, b.parent, encoded.size(), b.group);
        if (group.ok()) group = (*batch)->Append(encoded);
        staged += b.TotalSize();
      } else if (device) {
        group = (*batch)->StartBlock(b.key, b.parent, b.TotalSize(), b.group);
        if (group.ok()) {
          group = (*batch)->Append(absl::MakeConstSpan(staging.data() + staged, b.TotalSize()));
        }
        staged += b.TotalSize();
      } else {
        group = (*batch)->StartBlock(b.key, b.parent, b.TotalSize(), b.group);
        for (const RegionRange& r : b.Ranges()) {  // gather the pieces in order
          if (group.ok()) {
            group = (*batch)->Append(absl::MakeConstSpan(host_base + r.offset, r.size),
                                     absl::MakeConstSpan(host_base, region.size()));
          }
        }
      }
      if (!group.ok()) failed_at = i;
    }
    if (group.ok()) {
      absl::StatusOr<PutResult> r = (*batch)->Commit();
      if (!r.ok()) {
        group = r.status();
        failed_at = next;
      }
    }
    for (size_t i = next; i < end; ++i) {
      BlockOutcome o{static_cast<uint32_t>(i), absl::OkStatus(), blocks[i].TotalSize()};
      if (!group.ok()) {
        o.bytes = 0;
        o.status =
            i == failed_at
                ? group
                : absl::AbortedError(absl::StrCat("not stored: blocks[", failed_at,
                                                  "] of the same group failed: ", group.message()));
      }
      if (!done(o)) return absl::CancelledError("Save abandoned by its caller");
    }
    next = end;
    if (!group.ok()) {
      failure = group;
      break;
    }
  }
  for (size_t i = next; i < blocks.size(); ++i) {
    BlockOutcome o{static_cast<uint32_t>(i),
                   absl::AbortedError(
                       absl::StrCat("not stored after an earlier failure: ", failure.message())),
                   0};
    if (!done(o)) return absl::CancelledError("Save abandoned by its caller");
  }
  return absl::OkStatus();
}

}  // namespace kvtier
