#include "datapath/region_copy.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/checksum.h"
#include "base/sigbus_guard.h"
#include "datapath/gpu_tier.h"

namespace kvtier {

absl::Status ValidateRegionBlocks(absl::Span<const RegionBlock> blocks, uint64_t region_size,
                                  bool destinations) {
  struct Placed {
    RegionRange range;
    size_t block;
  };
  std::vector<Placed> all;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].segments.size() > kMaxSegmentsPerBlock) {
      return absl::InvalidArgumentError(
          absl::StrCat("blocks[", i, "]: more than ", kMaxSegmentsPerBlock, " segments"));
    }
    for (const RegionRange& r : blocks[i].Ranges()) {
      if (r.size == 0) {
        return absl::InvalidArgumentError(absl::StrCat("blocks[", i, "]: a size is 0"));
      }
      if (r.size > region_size || r.offset > region_size - r.size) {
        return absl::InvalidArgumentError(absl::StrCat("blocks[", i, "]: bytes [", r.offset, ", +",
                                                       r.size, ") are outside the region of ",
                                                       region_size, " bytes"));
      }
      all.push_back({r, i});
    }
  }
  if (destinations) {
    std::sort(all.begin(), all.end(),
              [](const Placed& a, const Placed& b) { return a.range.offset < b.range.offset; });
    for (size_t j = 1; j < all.size(); ++j) {
      const Placed& prev = all[j - 1];
      if (prev.range.offset + prev.range.size > all[j].range.offset) {
        return absl::InvalidArgumentError(
            prev.block == all[j].block
                ? absl::StrCat("blocks[", prev.block, "]: two segments overlap")
                : absl::StrCat("blocks[", prev.block, "] and blocks[", all[j].block,
                               "] overlap in the region"));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// Device regions need an engine that reaches device memory; and every range
// must lie in one allocation of the region.
absl::Status CheckDeviceAccess(MemoryRegion& region, absl::Span<const RegionBlock> blocks,
                               CopyEngine* engine) {
  if (region.kind() != MemoryKind::kDevice) return absl::OkStatus();
  if (engine == nullptr || !engine->Capabilities().device_memory) {
    return absl::FailedPreconditionError(absl::StrCat(
        region.Describe(), " is GPU memory, and this daemon's copy engine cannot reach it (",
        engine == nullptr ? "none" : engine->Capabilities().detail, ")"));
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    for (const RegionRange& r : blocks[i].Ranges()) {
      if (absl::StatusOr<uint8_t*> a = region.Address(r.offset, r.size); !a.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("blocks[", i, "]: ", a.status().message()));
      }
    }
  }
  return absl::OkStatus();
}

// One past the last block of the group starting at `next`: at most
// kRegionCopyGroup blocks, and for device regions at most
// kDeviceStagingBytes (but always one block).
size_t GroupEnd(absl::Span<const RegionBlock> blocks, size_t next, bool device) {
  const size_t end = std::min(blocks.size(), next + kRegionCopyGroup);
  if (!device) return end;
  uint64_t bytes = 0;
  for (size_t i = next; i < end; ++i) {
    bytes += blocks[i].TotalSize();
    if (bytes > kDeviceStagingBytes && i > next) return i;
  }
  return end;
}

}  // namespace

absl::Status SaveFromRegion(BlockCache& cache, const NamespaceId& ns, MemoryRegion& region,
                            absl::Span<const RegionBlock> blocks, const OutcomeSink& done,
                            const KeepGoing& keep_going, CopyEngine* engine,
                            BlockTransform* transform) {
  if (absl::Status s = ValidateRegionBlocks(blocks, region.size(), false); !s.ok()) return s;
  if (absl::Status s = CheckDeviceAccess(region, blocks, engine); !s.ok()) return s;
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
  absl::StatusOr<uint64_t> block_bytes = cache.NamespaceBlockBytes(ns);
  if (!block_bytes.ok()) return block_bytes.status();
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].TotalSize() > *block_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("blocks[", i, "]: ", blocks[i].TotalSize(),
                                                     " bytes exceed the namespace's ", *block_bytes,
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
    absl::StatusOr<std::unique_ptr<BlockCache::PutBatch>> batch = cache.BeginPut(ns);
    if (group.ok() && !batch.ok()) {
      group = batch.status();
      failed_at = next;
    }
    uint64_t staged = 0;
    for (size_t i = next; group.ok() && i < end; ++i) {
      const RegionBlock& b = blocks[i];
      if (transform != nullptr) {
        group = transform->Encode(absl::MakeConstSpan(staging.data() + staged, b.TotalSize()),
                                  absl::MakeSpan(encoded));
        if (group.ok()) group = (*batch)->StartBlock(b.key, b.parent, encoded.size());
        if (group.ok()) group = (*batch)->Append(encoded);
        staged += b.TotalSize();
      } else if (device) {
        group = (*batch)->StartBlock(b.key, b.parent, b.TotalSize());
        if (group.ok()) {
          group = (*batch)->Append(absl::MakeConstSpan(staging.data() + staged, b.TotalSize()));
        }
        staged += b.TotalSize();
      } else {
        group = (*batch)->StartBlock(b.key, b.parent, b.TotalSize());
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

absl::Status LoadIntoRegion(BlockCache& cache, const NamespaceId& ns, MemoryRegion& region,
                            absl::Span<const RegionBlock> blocks, const OutcomeSink& done,
                            const KeepGoing& keep_going, CopyEngine* engine,
                            BlockTransform* transform, GpuTier* gpu_tier) {
  if (absl::Status s = ValidateRegionBlocks(blocks, region.size(), true); !s.ok()) return s;
  if (absl::Status s = CheckDeviceAccess(region, blocks, engine); !s.ok()) return s;
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
  auto copy = [&](size_t i, const BlockCache::ReadHandle& h) {
    route = Route::kDone;
    absl::Span<const uint8_t> src = h.bytes();
    if (tier != nullptr) {
      // The GPU tier's copy, when it holds the block's current bytes.
      if (std::optional<GpuTier::Entry> hit = tier->Find(ns, blocks[i].key, h.checksum());
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
                tier->Reserve(ns, blocks[i].key, h.checksum(), src.size());
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
    } else {
      // Copy and verify in one pass: scatter the block over its pieces in
      // order, hashing each piece of the copy while it is in cache. Only a
      // block whose copy matches its checksum is OK.
      Checksum64Stream hash;
      size_t done = 0;
      bool vanished = false;
      for (const RegionRange& r : blocks[i].Ranges()) {
        uint8_t* dst = host_base + r.offset;
        const size_t piece_end = std::min<size_t>(src.size(), done + r.size);
        for (size_t at = done; at < piece_end && !vanished; at += BlockCache::kCopyChunk) {
          const size_t n = std::min(BlockCache::kCopyChunk, piece_end - at);
          vanished = !GuardedCopyAndHash(dst + (at - done), src.data() + at, n, hash, host_base,
                                         region.size());
        }
        done = piece_end;
        if (vanished || done == src.size()) break;
      }
      if (vanished) {
        o.bytes = 0;
        o.status = VanishedMemoryError(absl::StrCat("block ", blocks[i].key.ToHex()));
      } else if (hash.Digest() != h.checksum()) {
        o.bytes = 0;
        if (Checksum64(src) == h.checksum()) {
          // The cache's copy is sound: the destination changed under us.
          o.status = absl::AbortedError(absl::StrCat(
              "block ", blocks[i].key.ToHex(),
              ": the region changed while the block was copied into it; load it again"));
        } else {
          cache.ReportChecksumMismatch(h);
          o.status = absl::NotFoundError(absl::StrCat("block ", blocks[i].key.ToHex(),
                                                      " failed its checksum and was dropped"));
        }
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
        cache.Read(ns, keys, verify_in_cache);
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
    if (handles.ok()) {
      for (size_t i = next; i < end; ++i) {
        if (!keep_going()) return absl::CancelledError("Load abandoned by its caller");
        add(i, (*handles)[i - next]);
      }
      if (device) pinned = *std::move(handles);
    } else {
      // Some block failed: find out which, block by block.
      for (size_t i = next; i < end; ++i) {
        if (!keep_going()) return absl::CancelledError("Load abandoned by its caller");
        absl::StatusOr<std::vector<BlockCache::ReadHandle>> one =
            cache.Read(ns, absl::MakeConstSpan(&blocks[i].key, 1), verify_in_cache);
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
