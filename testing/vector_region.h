// VectorRegion: a MemoryRegion over a std::vector, for tests of the region
// copies and the region table (test-only).
#ifndef KVTIER_TESTING_VECTOR_REGION_H_
#define KVTIER_TESTING_VECTOR_REGION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "datapath/memory_region.h"

namespace kvtier {

// Host memory posing as a region of either kind: as kDevice it stands in
// for GPU memory, which only a device-capable CopyEngine may touch.
class VectorRegion final : public MemoryRegion {
 public:
  explicit VectorRegion(size_t n, MemoryKind kind = MemoryKind::kHost) : bytes_(n), kind_(kind) {}
  absl::Span<uint8_t> bytes() { return absl::MakeSpan(bytes_); }
  uint64_t size() const override { return bytes_.size(); }
  MemoryKind kind() const override { return kind_; }
  absl::StatusOr<uint8_t*> Address(uint64_t offset, uint64_t size) override {
    RETURN_IF_ERROR(CheckRegionRange(offset, size, bytes_.size()));
    return bytes_.data() + offset;
  }
  std::string Describe() const override { return "test region"; }

 private:
  std::vector<uint8_t> bytes_;
  const MemoryKind kind_;
};

}  // namespace kvtier

#endif  // KVTIER_TESTING_VECTOR_REGION_H_
