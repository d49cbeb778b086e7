// LoadIntoRegion: cached blocks copied (scattered) into a client region.
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

// Loads a block of the host tier into a host region: scatters it over the
// block's pieces in order, hashing the bytes copied as it copies them
// (base/hashed_copy.h: CopyAndHash). Only a block whose bytes copied match
// its checksum is OK. Touches
// nothing shared but `cache` (thread-safe), so blocks of one group may load
// on several threads.
BlockOutcome LoadHostBlock(BlockCache& cache, const RegionBlock& block, uint32_t index,
                           const BlockCache::ReadHandle& h, uint8_t* host_base,
                           uint64_t region_size) {
  const absl::Span<const uint8_t> src = h.bytes();
  BlockOutcome o{index, absl::OkStatus(), src.size()};
  if (src.size() > block.TotalSize()) {
    o.bytes = 0;
    o.status =
        absl::OutOfRangeError(absl::StrCat("block ", block.key.ToHex(), " holds ", src.size(),
                                           " bytes, more than its room of ", block.TotalSize()));
    return o;
  }
  Checksum64Stream hash;
  size_t done = 0;
  bool vanished = false;
  for (const RegionRange& r : block.Ranges()) {
    uint8_t* dst = host_base + r.offset;
    const size_t piece_end = std::min<size_t>(src.size(), done + r.size);
    for (size_t at = done; at < piece_end && !vanished; at += BlockCache::kCopyChunk) {
      const size_t n = std::min(BlockCache::kCopyChunk, piece_end - at);
      vanished =
          !GuardedCopyAndHash(dst + (at - done), src.data() + at, n, hash, host_base, region_size);
    }
    done = piece_end;
    if (vanished || done == src.size()) break;
  }
  if (vanished) {
    o.bytes = 0;
    o.status = VanishedMemoryError(absl::StrCat("block ", block.key.ToHex()));
  } else if (hash.Digest() != h.checksum()) {
    // The hash read the bytes copied, as they came from the pinned slot.
    o.bytes = 0;
    cache.ReportChecksumMismatch(h);
    o.status = absl::NotFoundError(
        absl::StrCat("block ", block.key.ToHex(), " failed its checksum and was dropped"));
  }
  return o;
}

}  // namespace

absl::Status LoadIntoRegion(BlockCache& cache, const NamespaceId& ns, MemoryRegion& region,
                            absl::Span<const RegionBlock> blocks, const OutcomeSink& done,
                            const KeepGoing& keep_going, CopyEngine* engine,
                            BlockTransform* transform, GpuTier* gpu_tier, CopyWorkers* workers) {
  RETURN_IF_ERROR(ValidateRegionBlocks(blocks, region.size(), true));
  RETURN_IF_ERROR(CheckDeviceAccess(region, blocks, engine));
  if (absl::StatusOr<uint64_t> open = cache.NamespaceBlockBytes(ns); !open.ok()) {
    return open.status();
  }
  const bool device = region.kind() == MemoryKind::kDevice;
  uint8_t* const host_base = device ? nullptr : *region.Address(0, region.size());
  // Device regions: blocks whose checksum held are queued into `scatter`
  // (host to device), blocks resident in the GPU tier of the region's device
  // into `from_tier` (device to device); their outcomes are settled when the
  // batches complete. Blocks copied from the host are also promoted into the
  // GPU tier in the same batch (`promoted`, committed when it lands).
  CopyBatch scatter{MemoryKind::kHost, MemoryKind::kDevice, region.device(), {}};
  CopyBatch from_tier{MemoryKind::kDevice, MemoryKind::kDevice, region.device(), {}};
  GpuTier* const tier =
      device && gpu_tier != nullptr && gpu_tier->device() == region.device() ? gpu_tier : nullptr;
  std::vector<GpuTier::Entry> tier_reads, promoted;  // pinned until the batches are done
  enum class Route { kDone, kHostToDevice, kTierToDevice };
  Route route = Route::kDone;
  // Encoded blocks are verified, decoded into `decoded` and copied from
  // there; it lives until the group's batch is done.
  std::deque<std::vector<uint8_t>> decoded;
  auto scatter_into = [&](CopyBatch& batch, size_t i, const uint8_t* src, size_t size) {
    size_t at = 0;
    for (const RegionRange& r : blocks[i].Ranges()) {
      const size_t n = std::min<size_t>(r.size, size - at);
      if (n == 0) break;
      batch.ops.push_back({*region.Address(r.offset, n), src + at, n});
      at += n;
    }
  };
  // The GPU tier keys a hybrid's group blocks by the group's storage id.
  auto TierNs = [&](size_t i) {
    return blocks[i].group == 0 ? ns : NamespaceId::OfGroup(ns, blocks[i].group);
  };
  const bool host_only = !device && transform == nullptr;
  auto copy = [&](size_t i, const BlockCache::ReadHandle& h) {
    route = Route::kDone;
    if (host_only) {
      return LoadHostBlock(cache, blocks[i], static_cast<uint32_t>(i), h, host_base, region.size());
    }
    absl::Span<const uint8_t> src = h.bytes();
    if (tier != nullptr) {
      // The GPU tier's copy, when it holds the block's current bytes.
      if (std::optional<GpuTier::Entry> hit = tier->Find(TierNs(i), blocks[i].key, h.checksum());
          hit.has_value() && hit->size <= blocks[i].TotalSize()) {
        scatter_into(from_tier, i, hit->data, hit->size);
        route = Route::kTierToDevice;
        tier_reads.push_back(*std::move(hit));
        return BlockOutcome{static_cast<uint32_t>(i), absl::OkStatus(), tier_reads.back().size};
      }
    }
    if (device && Checksum64(src) != h.checksum()) {
      // A device destination cannot be hashed: verify the source instead.
      cache.ReportChecksumMismatch(h);
      return BlockOutcome{static_cast<uint32_t>(i),
                          absl::NotFoundError(absl::StrCat("block ", blocks[i].key.ToHex(),
                                                           " failed its checksum and was dropped")),
                          0};
    }
    if (transform != nullptr) {
      decoded.emplace_back(transform->plain_bytes());
      if (absl::Status s = transform->Decode(src, absl::MakeSpan(decoded.back())); !s.ok()) {
        return BlockOutcome{
            static_cast<uint32_t>(i),
            absl::DataLossError(absl::StrCat("block ", blocks[i].key.ToHex(), ": ", s.message())),
            0};
      }
      src = decoded.back();
    }
    BlockOutcome o{static_cast<uint32_t>(i), absl::OkStatus(), src.size()};
    const uint64_t room = blocks[i].TotalSize();
    if (src.size() > room) {
      o.bytes = 0;
      o.status =
          absl::OutOfRangeError(absl::StrCat("block ", blocks[i].key.ToHex(), " holds ", src.size(),
                                             " bytes, more than its room of ", room));
    } else if (device) {
      scatter_into(scatter, i, src.data(), src.size());
      route = Route::kHostToDevice;
      if (tier != nullptr) {
        if (std::optional<GpuTier::Entry> slot =
                tier->Reserve(TierNs(i), blocks[i].key, h.checksum(), src.size());
            slot.has_value()) {
          scatter.ops.push_back({slot->data, src.data(), src.size()});
          promoted.push_back(*std::move(slot));
        }
      }
    } else if (transform != nullptr) {
      // Copy the decoded block, then check the destination holds it (the
      // engine may write there meanwhile).
      size_t at = 0;
      bool same = true, vanished = false;
      for (const RegionRange& r : blocks[i].Ranges()) {
        const size_t n = std::min<size_t>(r.size, src.size() - at);
        if (n == 0) break;
        bool equal = false;
        if (!GuardedCopy(host_base + r.offset, src.data() + at, n, host_base, region.size()) ||
            !GuardedEqual(host_base + r.offset, src.data() + at, n, &equal, host_base,
                          region.size())) {
          vanished = true;
          break;
        }
        same = same && equal;
        at += n;
      }
      if (vanished) {
        o.bytes = 0;
        o.status = VanishedMemoryError(absl::StrCat("block ", blocks[i].key.ToHex()));
      } else if (!same) {
        o.bytes = 0;
        o.status = absl::AbortedError(
            absl::StrCat("block ", blocks[i].key.ToHex(),
                         ": the region changed while the block was copied into it; load it again"));
      }
    }
    return o;
  };
  std::vector<BlockKey> keys;
  for (size_t next = 0, end = 0; next < blocks.size(); next = end) {
    // Decoded blocks are held until their group is copied: bound them.
    end = GroupEnd(blocks, next, transform != nullptr);
    keys.clear();
    for (size_t i = next; i < end; ++i) keys.push_back(blocks[i].key);
    // Host copies verify as they go, device copies verify the source (unless
    // the GPU tier serves them), encoded blocks verify in the cache.
    const bool verify_in_cache = !device && transform != nullptr;
    decoded.clear();
    absl::StatusOr<std::vector<BlockCache::ReadHandle>> handles =
        cache.Read(ns, keys, verify_in_cache, blocks[next].group);
    std::vector<BlockOutcome> outcomes;
    std::vector<BlockCache::ReadHandle> pinned;  // device: kept until the batch is done
    scatter.ops.clear();
    from_tier.ops.clear();
    std::vector<size_t> scattered, tiered;  // indexes into outcomes
    auto add = [&](size_t i, const BlockCache::ReadHandle& h) {
      outcomes.push_back(copy(i, h));
      if (route == Route::kHostToDevice) scattered.push_back(outcomes.size() - 1);
      if (route == Route::kTierToDevice) tiered.push_back(outcomes.size() - 1);
    };
    const absl::Time start = absl::Now();
    uint64_t group_bytes = 0;
    for (size_t i = next; i < end; ++i) group_bytes += blocks[i].TotalSize();
    if (handles.ok() && host_only && end - next >= 2 && group_bytes >= kTwoThreadGroupBytes) {
      // The blocks go to this thread and a helper, each taking the next one
      // not yet taken; each writes only its own outcomes.
      if (!keep_going()) return absl::CancelledError("Load abandoned by its caller");
      outcomes.resize(end - next);
      ForEachOnTwoThreads(workers, end - next, [&](size_t, size_t k) {
        outcomes[k] = LoadHostBlock(cache, blocks[next + k], static_cast<uint32_t>(next + k),
                                    (*handles)[k], host_base, region.size());
      });
    } else if (handles.ok()) {
      for (size_t i = next; i < end; ++i) {
        if (!keep_going()) return absl::CancelledError("Load abandoned by its caller");
        add(i, (*handles)[i - next]);
      }
      if (device) pinned = *std::move(handles);
    } else {
      // Some block failed: find out which, block by block.
      for (size_t i = next; i < end; ++i) {
        if (!keep_going()) return absl::CancelledError("Load abandoned by its caller");
        absl::StatusOr<std::vector<BlockCache::ReadHandle>> one = cache.Read(
            ns, absl::MakeConstSpan(&blocks[i].key, 1), verify_in_cache, blocks[i].group);
        if (!one.ok()) {
          outcomes.push_back(BlockOutcome{static_cast<uint32_t>(i), one.status(), 0});
          continue;
        }
        add(i, one->front());
        if (device) pinned.push_back(std::move(one->front()));
      }
    }
    // One batch per direction for the group: all of it lands, or none of
    // its blocks is OK.
    auto land = [&](const CopyBatch& batch, const std::vector<size_t>& which) {
      if (which.empty()) return true;
      const absl::Status landed = engine->CopySync(batch);
      for (size_t k : which) {
        if (landed.ok()) continue;
        outcomes[k].bytes = 0;
        outcomes[k].status = absl::Status(
            landed.code(), absl::StrCat("copying into GPU memory failed: ", landed.message()));
      }
      return landed.ok();
    };
    const bool promotions_landed = land(scatter, scattered);
    land(from_tier, tiered);
    for (const GpuTier::Entry& e : promoted) tier->Commit(e, promotions_landed);
    promoted.clear();
    tier_reads.clear();
    // The copy pass is this tier's delivery rate: feed the meter.
    uint64_t copied = 0;
    for (const BlockOutcome& o : outcomes) copied += o.bytes;
    cache.host_meter().Record(copied, absl::Now() - start);
    pinned.clear();
    if (handles.ok()) handles->clear();  // unpin before reporting
    for (const BlockOutcome& o : outcomes) {
      if (!done(o)) return absl::CancelledError("Load abandoned by its caller");
    }
  }
  return absl::OkStatus();
}

}  // namespace kvtier
