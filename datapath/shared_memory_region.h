// SharedMemoryRegion: a shared-memory file an engine created, mapped
// read-write and shared into the daemon. A file is accepted only if it is
//  - directly in the configured shared-memory directory (default /dev/shm),
//    not a symlink, a regular file with one name, on tmpfs or hugetlbfs: so
//    no client can make the daemon map its own catalog, slab files or any
//    other file it can write;
//  - owned by the daemon's user with no group or other permission bits
//    (0600), even for a root daemon: one user's engine cannot hand the
//    daemon another user's memory.
// Every page is allocated at registration (posix_fallocate), so a full tmpfs
// is an error then, not a fault later.
//
// Known limit: a file truncated by its owner while mapped makes the daemon's
// next access to the lost pages fault (SIGBUS); only the file's owner, who
// already shares the daemon's user, can do that.
//
// Thread-safety: immutable after Open; bytes() may be used from any thread.
#ifndef KVTIER_DATAPATH_SHARED_MEMORY_REGION_H_
#define KVTIER_DATAPATH_SHARED_MEMORY_REGION_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "datapath/memory_region.h"

namespace kvtier {

class SharedMemoryRegion final : public MemoryRegion {
 public:
  // Maps the first `size` bytes of `path`. INVALID_ARGUMENT: relative path,
  // size 0, larger than the file, or not a regular file; NOT_FOUND: no such
  // file; PERMISSION_DENIED: outside `allowed_dir`, not on tmpfs/hugetlbfs,
  // several names, owned by another user, group/other permission bits set,
  // or a symlink; RESOURCE_EXHAUSTED: its pages cannot be allocated;
  // INTERNAL if mmap fails.
  static absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> Open(
      const std::string& path, uint64_t size, const std::string& allowed_dir = "/dev/shm");
  ~SharedMemoryRegion() override;
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  absl::Span<uint8_t> bytes() { return {data_, size_}; }
  uint64_t size() const override { return size_; }
  absl::StatusOr<uint8_t*> Address(uint64_t offset, uint64_t size) override;
  std::string Describe() const override;
  // Whether process `pid` (as this daemon sees it) maps this file.
  bool IsMappedBy(int pid) const;

 private:
  SharedMemoryRegion(std::string path, uint8_t* data, uint64_t size, dev_t dev, ino_t ino)
      : path_(std::move(path)), data_(data), size_(size), dev_(dev), ino_(ino) {}
  const std::string path_;
  uint8_t* const data_;
  const uint64_t size_;
  const dev_t dev_;
  const ino_t ino_;
};

}  // namespace kvtier

#endif  // KVTIER_DATAPATH_SHARED_MEMORY_REGION_H_
