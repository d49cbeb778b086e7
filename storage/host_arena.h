// HostArena: one contiguous anonymous memory mapping that backs the host
// tier. By default (Commit::kOnFirstTouch) pages are committed on first
// touch (MAP_NORESERVE), so a large arena costs nothing until blocks fill
// it. Later the CUDA backend pins it once with cudaHostRegister.
//
// With Pages::kTransparentHuge (the daemon's default) the mapping starts on a
// 2 MiB boundary and is advised MADV_HUGEPAGE, so the kernel may back it
// with transparent huge pages (where /sys/kernel/mm/transparent_hugepage
// allows). A block then spans few pages: copies to and from it miss the TLB
// less, and an O_DIRECT read or write of it reaches the disk in few large
// requests (a 4 KiB-page buffer is one DMA segment per page, and a device
// takes a bounded number of segments per request). Where the kernel refuses
// the advice, or has transparent huge pages switched off, the arena keeps
// base pages and says so (huge_pages_advised()).
//
// With Commit::kAtCreate every page is faulted in (and zeroed by the
// kernel) before Create returns, instead of on the first write of each: a
// block stored into never-used arena memory otherwise pays those faults in
// its copy (bench/put_get_rpc's "first fill": 256 KiB Puts at less than
// half the rate of Puts into resident slots). It costs start-up time (the
// kernel zeroes the whole arena) and commits the memory at once.
//
// Thread-safety: the mapping itself is immutable; callers coordinate access
// to its bytes (the host tier hands each slot to one owner at a time).
#ifndef KVTIER_STORAGE_HOST_ARENA_H_
#define KVTIER_STORAGE_HOST_ARENA_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/huge_page.h"

namespace kvtier {

class HostArena {
 public:
  enum class Pages { kBase, kTransparentHuge };
  enum class Commit { kOnFirstTouch, kAtCreate };
  // A kTransparentHuge arena is aligned to kHugePageBytes (x86-64's huge
  // page, base/huge_page.h).

  // RESOURCE_EXHAUSTED if the mapping fails, or if kAtCreate cannot fault
  // it all in (more than base/available_memory.h's AvailableMemoryBytes(),
  // refused before mapping anything, or the kernel refuses); INVALID_ARGUMENT
  // for 0 bytes.
  static absl::StatusOr<std::unique_ptr<HostArena>> Create(uint64_t bytes,
                                                           Pages pages = Pages::kBase,
                                                           Commit commit = Commit::kOnFirstTouch);
  ~HostArena();
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // The kernel's transparent huge page mode ("always", "madvise", "never"),
  // or "none" without them.
  static std::string TransparentHugePageMode();
  // True when the kernel took the MADV_HUGEPAGE advice for the whole arena
  // and has transparent huge pages on ("always" or "madvise").
  bool huge_pages_advised() const { return huge_pages_advised_; }

 private:
  // Keeps the 2 MiB-aligned `bytes` of a mapping of bytes + kHugePageBytes
  // at `base` (unmapping the slack either side) and advises huge pages.
  static std::unique_ptr<HostArena> AlignToHugePage(uint8_t* base, uint64_t bytes);
  HostArena(uint8_t* data, uint64_t size, bool huge)
      : data_(data), size_(size), huge_pages_advised_(huge) {}
  uint8_t* const data_;
  const uint64_t size_;
  const bool huge_pages_advised_;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_HOST_ARENA_H_
