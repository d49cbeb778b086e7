// SharedRegion: a shared-memory file this process creates (mode 0600, every
// page allocated) and maps read-write, for Client::RegisterMemory. The file
// is unmapped and removed when the SharedRegion goes.
//
// Thread-safety: immutable after Create; data() may be used from any thread.
#ifndef KVTIER_INCLUDE_KVTIER_SHARED_REGION_H_
#define KVTIER_INCLUDE_KVTIER_SHARED_REGION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kvtier::client {

class SharedRegion {
 public:
  // `dir` should be the daemon's server.shm_dir. INTERNAL (with errno text)
  // if the file cannot be created, sized or mapped.
  static absl::StatusOr<std::unique_ptr<SharedRegion>> Create(uint64_t size,
                                                              const std::string& dir = "/dev/shm");
  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  SharedRegion(std::string path, uint8_t* data, uint64_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  const std::string path_;
  uint8_t* const data_;
  const uint64_t size_;
};

}  // namespace kvtier::client

#endif  // KVTIER_INCLUDE_KVTIER_SHARED_REGION_H_
