#include "gpu/device_region.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kvtier {

DeviceRegion::DeviceRegion(int device, std::vector<Tensor> tensors, std::string what,
                           std::function<void()> release)
    : device_(device),
      tensors_(std::move(tensors)),
      what_(std::move(what)),
      release_(std::move(release)) {
  for (const Tensor& t : tensors_) {
    starts_.push_back(size_);
    size_ += t.size;
  }
}

DeviceRegion::~DeviceRegion() {
  if (release_) release_();
}

absl::StatusOr<uint8_t*> DeviceRegion::Address(uint64_t offset, uint64_t size) {
  RETURN_IF_ERROR(CheckRegionRange(offset, size, size_));
  // The last tensor starting at or before offset.
  const size_t i = std::upper_bound(starts_.begin(), starts_.end(), offset) - starts_.begin() - 1;
  const uint64_t in = offset - starts_[i];
  if (size > tensors_[i].size - in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bytes [", offset, ", +", size, ") straddle tensors ", i, " and ", i + 1,
        " of the region (tensor ", i, " ends at ", starts_[i] + tensors_[i].size, ")"));
  }
  return tensors_[i].base + in;
}

std::string DeviceRegion::Describe() const {
  return absl::StrCat(what_, " on GPU ", device_, " (", tensors_.size(), " tensor(s), ", size_,
                      " bytes)");
}

}  // namespace kvtier
