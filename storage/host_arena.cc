#include "storage/host_arena.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/available_memory.h"
#include "base/status_macros.h"

namespace kvtier {
namespace {

void* MapAnonymous(uint64_t bytes) {
  return mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
              -1, 0);
}

#ifndef MADV_POPULATE_WRITE  // glibc before 2.35 does not name it
#define MADV_POPULATE_WRITE 23
#endif

// Faults in every page of [data, data + bytes) for writing. The kernel does
// it in one call where it knows MADV_POPULATE_WRITE (Linux 5.14); older ones
// refuse the advice (EINVAL) and get a write to each page instead.
absl::Status Populate(uint8_t* data, uint64_t bytes) {
  if (madvise(data, bytes, MADV_POPULATE_WRITE) == 0) return absl::OkStatus();
  if (errno != EINVAL) {
    return absl::ResourceExhaustedError(
        absl::StrCat("could not fault in the ", bytes, "-byte host arena: ", std::strerror(errno)));
  }
  volatile uint8_t* page = data;
  for (uint64_t off = 0; off < bytes; off += 4096) page[off] = 0;
  return absl::OkStatus();
}

}  // namespace

std::string HostArena::TransparentHugePageMode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(f, modes);
  const size_t open = modes.find('['), close = modes.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "none";
  return modes.substr(open + 1, close - open - 1);
}

absl::StatusOr<std::unique_ptr<HostArena>> HostArena::Create(uint64_t bytes, Pages pages,
                                                             Commit commit) {
  if (bytes == 0) return absl::InvalidArgumentError("host arena size must be > 0");
  const bool huge = pages == Pages::kTransparentHuge;
  // A huge-page arena maps a huge page more than it needs and unmaps the
  // slack either side of the first 2 MiB boundary.
  const uint64_t slack = huge ? kHugePageBytes : 0;
  constexpr uint64_t kPage = 4096;
  if (bytes > UINT64_MAX - slack - kPage) {
    return absl::InvalidArgumentError(absl::StrCat("host arena size ", bytes, " is too large"));
  }
  // Refused before anything is mapped where it cannot fit: faulting in more
  // than there is would wake the OOM killer rather than fail a call.
  if (commit == Commit::kAtCreate) {
    if (const uint64_t available = AvailableMemoryBytes(); bytes > available) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot fault in a ", bytes, "-byte host arena (host_tier.prefault): ", available,
          " bytes are available (the least of MemAvailable and the memory cgroup's headroom)"));
    }
  }
  void* p = MapAnonymous(bytes + slack);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap of a ", bytes, "-byte host arena failed: ", std::strerror(errno)));
  }
  auto* base = static_cast<uint8_t*>(p);
  std::unique_ptr<HostArena> arena;
  if (!huge) {
    arena.reset(new HostArena(base, bytes, false));
  } else {
    arena = AlignToHugePage(base, bytes);
  }
  // After the huge-page advice, so the kernel faults in huge pages where it can.
  if (commit == Commit::kAtCreate) RETURN_IF_ERROR(Populate(arena->data_, bytes));
  return arena;
}

std::unique_ptr<HostArena> HostArena::AlignToHugePage(uint8_t* base, uint64_t bytes) {
  const uint64_t slack = kHugePageBytes;
  constexpr uint64_t kPage = 4096;
  const auto at = reinterpret_cast<uintptr_t>(base);
  const uint64_t head = (kHugePageBytes - at % kHugePageBytes) % kHugePageBytes;
  uint8_t* data = base + head;
  if (head > 0) munmap(base, head);
  // The kernel mapped whole pages: the tail's slack starts at the page after
  // the arena's last byte.
  const uint64_t tail = (bytes + kPage - 1) / kPage * kPage;
  if (slack - head > 0) munmap(data + tail, slack - head);
  // EINVAL where the kernel has no transparent huge pages: base pages then.
  // The advice also "succeeds" with them switched off (enabled = never).
  const std::string mode = TransparentHugePageMode();
  const bool advised =
      madvise(data, bytes, MADV_HUGEPAGE) == 0 && (mode == "always" || mode == "madvise");
  return std::unique_ptr<HostArena>(new HostArena(data, bytes, advised));
}

HostArena::~HostArena() { munmap(data_, size_); }

}  // namespace kvtier
