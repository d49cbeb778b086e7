// HostArena: one contiguous anonymous memory mapping that backs the host
// tier. Pages are committed on first touch (MAP_NORESERVE), so a large arena
// costs nothing until blocks fill it. Later the CUDA backend pins it once with
// cudaHostRegister.
//
// Thread-safety: the mapping itself is immutable; callers coordinate access
// to its bytes (the host tier hands each slot to one owner at a time).
#ifndef KVTIER_STORAGE_HOST_ARENA_H_
#define KVTIER_STORAGE_HOST_ARENA_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace kvtier {

class HostArena {
 public:
  // RESOURCE_EXHAUSTED if the mapping fails; INVALID_ARGUMENT for 0 bytes.
  static absl::StatusOr<std::unique_ptr<HostArena>> Create(uint64_t bytes);
  ~HostArena();
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  HostArena(uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  uint8_t* const data_;
  const uint64_t size_;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_HOST_ARENA_H_
