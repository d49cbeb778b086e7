#include "storage/region_copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "storage/checksum.h"

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

absl::Status SaveFromRegion(BlockCache& cache, const NamespaceId& ns, MemoryRegion& region,
                            absl::Span<const RegionBlock> blocks, const OutcomeSink& done,
                            const KeepGoing& keep_going) {
  const absl::Span<uint8_t> bytes = region.bytes();
  if (absl::Status s = ValidateRegionBlocks(blocks, bytes.size(), false); !s.ok()) return s;
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
    const size_t end = std::min(blocks.size(), next + kRegionCopyGroup);
    if (!keep_going()) return absl::CancelledError("Save abandoned by its caller");
    absl::Status group = absl::OkStatus();
    size_t failed_at = end;
    absl::StatusOr<std::unique_ptr<BlockCache::PutBatch>> batch = cache.BeginPut(ns);
    if (!batch.ok()) {
      group = batch.status();
      failed_at = next;
    }
    for (size_t i = next; group.ok() && i < end; ++i) {
      const RegionBlock& b = blocks[i];
      group = (*batch)->StartBlock(b.key, b.parent, b.TotalSize());
      for (const RegionRange& r : b.Ranges()) {  // gather the pieces in order
        if (group.ok()) group = (*batch)->Append(bytes.subspan(r.offset, r.size));
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
                            const KeepGoing& keep_going) {
  const absl::Span<uint8_t> bytes = region.bytes();
  if (absl::Status s = ValidateRegionBlocks(blocks, bytes.size(), true); !s.ok()) return s;
  if (absl::StatusOr<uint64_t> open = cache.NamespaceBlockBytes(ns); !open.ok()) {
    return open.status();
  }
  auto copy = [&](size_t i, const BlockCache::ReadHandle& h) {
    const absl::Span<const uint8_t> src = h.bytes();
    BlockOutcome o{static_cast<uint32_t>(i), absl::OkStatus(), src.size()};
    const uint64_t room = blocks[i].TotalSize();
    if (src.size() > room) {
      o.bytes = 0;
      o.status =
          absl::OutOfRangeError(absl::StrCat("block ", blocks[i].key.ToHex(), " holds ", src.size(),
                                             " bytes, more than its room of ", room));
    } else {
      // Copy and verify in one pass: scatter the block over its pieces in
      // order, hashing each piece of the copy while it is in cache. Only a
      // block whose copy matches its checksum is OK.
      Checksum64Stream hash;
      size_t done = 0;
      for (const RegionRange& r : blocks[i].Ranges()) {
        uint8_t* dst = bytes.data() + r.offset;
        const size_t piece_end = std::min<size_t>(src.size(), done + r.size);
        for (size_t at = done; at < piece_end; at += BlockCache::kCopyChunk) {
          const size_t n = std::min(BlockCache::kCopyChunk, piece_end - at);
          std::memcpy(dst + (at - done), src.data() + at, n);
          hash.Update(absl::Span<const uint8_t>(dst + (at - done), n));
        }
        done = piece_end;
        if (done == src.size()) break;
      }
      if (hash.Digest() != h.checksum()) {
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
  for (size_t next = 0; next < blocks.size(); next += kRegionCopyGroup) {
    const size_t end = std::min(blocks.size(), next + kRegionCopyGroup);
    keys.clear();
    for (size_t i = next; i < end; ++i) keys.push_back(blocks[i].key);
    absl::StatusOr<std::vector<BlockCache::ReadHandle>> handles =
        cache.Read(ns, keys, /*verify=*/false);
    std::vector<BlockOutcome> outcomes;
    if (handles.ok()) {
      // The copy-and-verify pass is this tier's delivery rate: feed the meter.
      const absl::Time start = absl::Now();
      uint64_t copied = 0;
      for (size_t i = next; i < end; ++i) {
        if (!keep_going()) return absl::CancelledError("Load abandoned by its caller");
        outcomes.push_back(copy(i, (*handles)[i - next]));
        copied += outcomes.back().bytes;
      }
      cache.host_meter().Record(copied, absl::Now() - start);
      handles->clear();  // unpin before reporting
    } else {
      // Some block failed: find out which, block by block.
      for (size_t i = next; i < end; ++i) {
        if (!keep_going()) return absl::CancelledError("Load abandoned by its caller");
        absl::StatusOr<std::vector<BlockCache::ReadHandle>> one =
            cache.Read(ns, absl::MakeConstSpan(&blocks[i].key, 1), /*verify=*/false);
        outcomes.push_back(one.ok() ? copy(i, one->front())
                                    : BlockOutcome{static_cast<uint32_t>(i), one.status(), 0});
      }
    }
    for (const BlockOutcome& o : outcomes) {
      if (!done(o)) return absl::CancelledError("Load abandoned by its caller");
    }
  }
  return absl::OkStatus();
}

}  // namespace kvtier
