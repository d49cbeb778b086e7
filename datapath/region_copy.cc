// Validation of region block lists and the copy grouping Save and Load share.
#include "datapath/region_copy.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/checksum.h"
#include "base/sigbus_guard.h"
#include "datapath/gpu_tier.h"
#include "datapath/region_groups.h"

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

size_t GroupEnd(absl::Span<const RegionBlock> blocks, size_t next, bool device) {
  size_t end = std::min(blocks.size(), next + kRegionCopyGroup);
  // A batch reads one layer group of a hybrid namespace.
  for (size_t i = next + 1; i < end; ++i) {
    if (blocks[i].group != blocks[next].group) {
      end = i;
      break;
    }
  }
  if (!device) return end;
  uint64_t bytes = 0;
  for (size_t i = next; i < end; ++i) {
    bytes += blocks[i].TotalSize();
    if (bytes > kDeviceStagingBytes && i > next) return i;
  }
  return end;
}

void OnTwoThreads(CopyWorkers* workers, const std::function<void(size_t part)>& part) {
  if (workers != nullptr) {
    workers->OnTwoThreads(part);
    return;
  }
  std::optional<std::thread> helper;
  try {
    helper.emplace(part, 1);
  } catch (const std::system_error&) {  // no thread to be had
  }
  part(0);
  if (helper.has_value()) {
    helper->join();
  } else {
    part(1);
  }
}

void ForEachOnTwoThreads(CopyWorkers* workers, size_t count,
                         const std::function<void(size_t part, size_t k)>& block) {
  // Relaxed: the counter only hands out indices; OnTwoThreads' join orders
  // each block's writes before the caller's reads.
  std::atomic<size_t> next{0};
  OnTwoThreads(workers, [&](size_t part) {
    for (size_t k = next.fetch_add(1, std::memory_order_relaxed); k < count;
         k = next.fetch_add(1, std::memory_order_relaxed)) {
      block(part, k);
    }
  });
}

}  // namespace kvtier
