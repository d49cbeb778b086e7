#include "storage/memory_region.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace kvtier {

absl::StatusOr<std::string> RegionTable::Add(std::unique_ptr<MemoryRegion> region) {
  absl::MutexLock lock(&mu_);
  const uint64_t size = region->bytes().size();
  if (regions_.size() >= max_regions_) {
    return absl::ResourceExhaustedError(absl::StrCat(regions_.size(),
                                                     " memory regions are registered (max ",
                                                     max_regions_, "); unregister some"));
  }
  if (bytes_ + size > max_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "registering ", size, " more bytes would exceed the limit of ", max_bytes_, " bytes"));
  }
  std::string id;
  do {
    id = absl::StrFormat("r%016x", absl::Uniform<uint64_t>(bitgen_));
  } while (regions_.contains(id));
  regions_.emplace(id, std::shared_ptr<MemoryRegion>(std::move(region)));
  bytes_ += size;
  return id;
}

absl::StatusOr<std::shared_ptr<MemoryRegion>> RegionTable::Find(absl::string_view id) const {
  absl::MutexLock lock(&mu_);
  auto it = regions_.find(id);
  if (it == regions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("memory region '", id.substr(0, 64), "' is not registered"));
  }
  return it->second;
}

absl::Status RegionTable::Remove(absl::string_view id) {
  std::shared_ptr<MemoryRegion> gone;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(id);
    if (it == regions_.end()) {
      return absl::NotFoundError(
          absl::StrCat("memory region '", id.substr(0, 64), "' is not registered"));
    }
    bytes_ -= it->second->bytes().size();
    gone = std::move(it->second);
    regions_.erase(it);
  }
  // Wait for running transfers (each holds a reference), then unmap here,
  // outside the lock.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (gone.use_count() > 1 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  if (gone.use_count() > 1) {
    spdlog::warn("memory region {} unregistered while transfers still use it", std::string(id));
  }
  return absl::OkStatus();
}

size_t RegionTable::size() const {
  absl::MutexLock lock(&mu_);
  return regions_.size();
}

}  // namespace kvtier
