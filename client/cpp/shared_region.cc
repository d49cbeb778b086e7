#include "kvtier/shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kvtier::client {

absl::StatusOr<std::unique_ptr<SharedRegion>> SharedRegion::Create(uint64_t size,
                                                                   const std::string& dir) {
  std::string path = dir + "/kvtier-region-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot create a file in ", dir, ": ", std::strerror(errno)));
  }
  void* p = MAP_FAILED;
  int err = fchmod(fd, 0600) == 0 ? 0 : errno;
  if (err == 0) err = posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (err == 0) {
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) err = errno;
  }
  close(fd);
  if (p == MAP_FAILED) {
    unlink(path.c_str());
    return absl::InternalError(
        absl::StrCat("cannot make ", size, " bytes of shared memory: ", std::strerror(err)));
  }
  return std::unique_ptr<SharedRegion>(new SharedRegion(path, static_cast<uint8_t*>(p), size));
}

SharedRegion::~SharedRegion() {
  munmap(data_, size_);
  unlink(path_.c_str());
}

}  // namespace kvtier::client
