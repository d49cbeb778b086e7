#include "datapath/memory_region.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace kvtier {

namespace {

// True once the process behind `pidfd` has exited.
bool Exited(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

}  // namespace

absl::StatusOr<std::string> RegionTable::Add(std::unique_ptr<MemoryRegion> region, int owner_pid,
                                             absl::string_view tenant) {
  int pidfd = -1;
  if (owner_pid < 0) {
    return absl::InvalidArgumentError(absl::StrCat("owner_pid ", owner_pid, " is negative"));
  }
  if (owner_pid > 0) {
    pidfd = static_cast<int>(syscall(SYS_pidfd_open, owner_pid, 0));
    if (pidfd < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("owner_pid ", owner_pid, ": no such process (", std::strerror(errno), ")"));
    }
  }
  MutexLock lock(&mu_);
  const uint64_t size = region->size();
  absl::Status refused;
  if (regions_.size() >= max_regions_) {
    refused = absl::ResourceExhaustedError(absl::StrCat(regions_.size(),
                                                        " memory regions are registered (max ",
                                                        max_regions_, "); unregister some"));
  } else if (bytes_ + size > max_bytes_) {
    refused = absl::ResourceExhaustedError(absl::StrCat(
        "registering ", size, " more bytes would exceed the limit of ", max_bytes_, " bytes"));
  } else if (auto share = shares_.find(tenant); share != shares_.end()) {
    if (share->second.regions >= tenant_max_regions_) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat("this tenant has ", share->second.regions,
                       " memory regions registered (limits.tenant_max_regions ",
                       tenant_max_regions_, "); unregister some"));
    } else if (share->second.bytes + size > tenant_max_bytes_) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat("registering ", size, " more bytes would exceed this tenant's share of ",
                       tenant_max_bytes_, " bytes (limits.tenant_max_region_bytes)"));
    }
  } else if (size > tenant_max_bytes_) {
    refused = absl::ResourceExhaustedError(
        absl::StrCat("a region of ", size, " bytes exceeds this tenant's share of ",
                     tenant_max_bytes_, " bytes (limits.tenant_max_region_bytes)"));
  }
  if (!refused.ok()) {
    if (pidfd >= 0) close(pidfd);
    return refused;
  }
  std::string id;
  do {
    id = absl::StrFormat("r%016x", absl::Uniform<uint64_t>(bitgen_));
  } while (regions_.contains(id));
  regions_.emplace(
      id, Entry{std::shared_ptr<MemoryRegion>(std::move(region)), pidfd, std::string(tenant)});
  bytes_ += size;
  TenantShare& share = shares_[tenant];
  share.regions += 1;
  share.bytes += size;
  return id;
}

absl::Status CheckRegionRange(uint64_t offset, uint64_t size, uint64_t region_size) {
  if (size > region_size || offset > region_size - size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bytes [", offset, ", +", size, ") are outside the region of ", region_size, " bytes"));
  }
  return absl::OkStatus();
}

RegionTable::~RegionTable() {
  MutexLock lock(&mu_);
  for (auto& [id, entry] : regions_) {
    if (entry.owner_pidfd >= 0) close(entry.owner_pidfd);
  }
}

absl::StatusOr<std::shared_ptr<MemoryRegion>> RegionTable::Find(absl::string_view id,
                                                                absl::string_view tenant) const {
  MutexLock lock(&mu_);
  auto it = regions_.find(id);
  if (it == regions_.end() || it->second.tenant != tenant) {
    return absl::NotFoundError(
        absl::StrCat("memory region '", id.substr(0, 64), "' is not registered"));
  }
  return it->second.region;
}

RegionTable::Entry RegionTable::TakeLocked(absl::flat_hash_map<std::string, Entry>::iterator it) {
  const uint64_t size = it->second.region->size();
  bytes_ -= size;
  if (auto share = shares_.find(it->second.tenant); share != shares_.end()) {
    share->second.regions -= 1;
    share->second.bytes -= size;
    if (share->second.regions == 0) shares_.erase(share);
  }
  Entry entry = std::move(it->second);
  regions_.erase(it);
  return entry;
}

void RegionTable::Retire(absl::string_view id, Entry entry) {
  if (entry.owner_pidfd >= 0) close(entry.owner_pidfd);
  // Wait for running transfers (each holds a reference), then unmap here,
  // outside the lock.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (entry.region.use_count() > 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  if (entry.region.use_count() > 1) {
    spdlog::warn("memory region {} unregistered while transfers still use it", std::string(id));
  }
}

absl::Status RegionTable::Remove(absl::string_view id, absl::string_view tenant) {
  Entry gone;
  {
    MutexLock lock(&mu_);
    auto it = regions_.find(id);
    if (it == regions_.end() || it->second.tenant != tenant) {
      return absl::NotFoundError(
          absl::StrCat("memory region '", id.substr(0, 64), "' is not registered"));
    }
    gone = TakeLocked(it);
  }
  Retire(id, std::move(gone));
  return absl::OkStatus();
}

size_t RegionTable::RemoveExitedOwners() {
  std::vector<std::pair<std::string, Entry>> gone;
  {
    MutexLock lock(&mu_);
    for (auto it = regions_.begin(); it != regions_.end();) {
      if (it->second.owner_pidfd >= 0 && Exited(it->second.owner_pidfd)) {
        std::string id = it->first;
        auto next = std::next(it);
        gone.emplace_back(std::move(id), TakeLocked(it));
        it = next;
      } else {
        ++it;
      }
    }
  }
  for (auto& [id, entry] : gone) {
    spdlog::info("memory region {} dropped: its owner process exited ({})", id,
                 entry.region->Describe());
    Retire(id, std::move(entry));
  }
  return gone.size();
}

size_t RegionTable::size() const {
  MutexLock lock(&mu_);
  return regions_.size();
}

}  // namespace kvtier
