#include "datapath/shared_memory_region.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace kvtier {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

absl::Status OpenError(const std::string& path, int err) {
  if (err == ENOENT) return absl::NotFoundError(absl::StrCat("no file '", path, "'"));
  if (err == ELOOP) return absl::PermissionDeniedError(absl::StrCat("'", path, "' is a symlink"));
  if (err == EACCES || err == EPERM) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open '", path, "': ", std::strerror(err)));
  }
  return absl::InvalidArgumentError(absl::StrCat("cannot open '", path, "': ", std::strerror(err)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Open(
    const std::string& path, uint64_t size, const std::string& allowed_dir) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory path '", path, "' must be absolute"));
  }
  if (size == 0) return absl::InvalidArgumentError("shared memory size_bytes must be > 0");
  // The file must sit directly in the allowed directory (after resolving the
  // directory, not the file: the file itself must not be a symlink).
  const size_t slash = path.rfind('/');
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = path.substr(slash + 1);
  char resolved_dir[PATH_MAX], resolved_allowed[PATH_MAX];
  if (name.empty() || name == "." || name == ".." ||
      ::realpath(dir.c_str(), resolved_dir) == nullptr ||
      ::realpath(allowed_dir.c_str(), resolved_allowed) == nullptr ||
      std::strcmp(resolved_dir, resolved_allowed) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "'", path, "' is not a file directly in the shared-memory directory ", allowed_dir));
  }
  // Look before opening for I/O: O_PATH opens nothing (no device side
  // effects) and O_NOFOLLOW refuses a symlink.
  Fd probe{::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC)};
  if (probe.fd < 0) return OpenError(path, errno);
  struct stat st;
  if (::fstat(probe.fd, &st) != 0) {
    return absl::InternalError(absl::StrCat("fstat '", path, "': ", std::strerror(errno)));
  }
  if (S_ISLNK(st.st_mode)) {  // O_PATH | O_NOFOLLOW opens the link itself
    return absl::PermissionDeniedError(absl::StrCat("'", path, "' is a symlink"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a regular file"));
  }
  struct statfs fs;
  if (::fstatfs(probe.fd, &fs) != 0 || (fs.f_type != TMPFS_MAGIC && fs.f_type != HUGETLBFS_MAGIC)) {
    return absl::PermissionDeniedError(
        absl::StrCat("'", path, "' is not on tmpfs or hugetlbfs (shared memory)"));
  }
  if (st.st_nlink != 1) {
    return absl::PermissionDeniedError(
        absl::StrCat("'", path, "' has ", st.st_nlink, " names; a region must have one"));
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
  // Re-open the very inode we checked, for reading and writing.
  Fd fd{::open(absl::StrCat("/proc/self/fd/", probe.fd).c_str(), O_RDWR | O_CLOEXEC)};
  if (fd.fd < 0) return OpenError(path, errno);
  // Back every page now: a sparse file on a full tmpfs would otherwise fault
  // (SIGBUS) at the daemon's first write to an unbacked page.
  if (int err = ::posix_fallocate(fd.fd, 0, static_cast<off_t>(size)); err != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot back ", size, " bytes of '", path, "': ", std::strerror(err)));
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
  if (p == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("mmap '", path, "': ", std::strerror(errno)));
  }
  return std::unique_ptr<SharedMemoryRegion>(
      new SharedMemoryRegion(path, static_cast<uint8_t*>(p), size, st.st_dev, st.st_ino));
}

bool SharedMemoryRegion::IsMappedBy(int pid) const {
  // /proc/PID/maps lines: "start-end perms offset major:minor inode path".
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  std::string line;
  while (std::getline(maps, line)) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 5) continue;
    uint64_t inode = 0;
    if (!absl::SimpleAtoi(f[4], &inode) || inode != ino_) continue;
    std::vector<absl::string_view> dev = absl::StrSplit(f[3], ':');
    uint32_t major = 0, minor = 0;
    if (dev.size() == 2 && absl::SimpleHexAtoi(dev[0], &major) &&
        absl::SimpleHexAtoi(dev[1], &minor) && makedev(major, minor) == dev_) {
      return true;
    }
  }
  return false;
}

SharedMemoryRegion::~SharedMemoryRegion() { ::munmap(data_, size_); }

absl::StatusOr<uint8_t*> SharedMemoryRegion::Address(uint64_t offset, uint64_t size) {
  RETURN_IF_ERROR(CheckRegionRange(offset, size, size_));
  return data_ + offset;
}

std::string SharedMemoryRegion::Describe() const {
  return absl::StrCat("shared memory ", path_, " (", size_, " bytes)");
}

}  // namespace kvtier
