#include "storage/host_arena.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<HostArena>> HostArena::Create(uint64_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("host arena size must be > 0");
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap of a ", bytes, "-byte host arena failed: ", std::strerror(errno)));
  }
  return std::unique_ptr<HostArena>(new HostArena(static_cast<uint8_t*>(p), bytes));
}

HostArena::~HostArena() { munmap(data_, size_); }

}  // namespace kvtier
