#include "storage/shared_memory_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Open(
    const std::string& path, uint64_t size) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory path '", path, "' must be absolute"));
  }
  if (size == 0) return absl::InvalidArgumentError("shared memory size_bytes must be > 0");
  const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat("no file '", path, "'"));
    if (err == ELOOP) {
      return absl::PermissionDeniedError(absl::StrCat("'", path, "' is a symlink"));
    }
    if (err == EACCES || err == EPERM) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot open '", path, "': ", std::strerror(err)));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open '", path, "': ", std::strerror(err)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return absl::InternalError(absl::StrCat("fstat '", path, "': ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a regular file"));
  }
  // Even a root daemon insists: otherwise any client could name another
  // user's file and read or write it through Save and Load.
  const uid_t me = ::geteuid();
  if (st.st_uid != me) {
    return absl::PermissionDeniedError(
        absl::StrCat("'", path, "' is owned by uid ", st.st_uid, ", not the daemon's uid ", me));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "'%s' has mode %o; it must not be accessible to group or others (chmod 600)", path,
        st.st_mode & 0777));
  }
  if (static_cast<uint64_t>(st.st_size) < size) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' holds ", st.st_size, " bytes, fewer than size_bytes ", size));
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("mmap '", path, "': ", std::strerror(errno)));
  }
  return std::unique_ptr<SharedMemoryRegion>(
      new SharedMemoryRegion(path, static_cast<uint8_t*>(p), size));
}

SharedMemoryRegion::~SharedMemoryRegion() { ::munmap(data_, size_); }

std::string SharedMemoryRegion::Describe() const {
  return absl::StrCat("shared memory ", path_, " (", size_, " bytes)");
}

}  // namespace kvtier
