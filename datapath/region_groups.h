// What Save (region_save.cc) and Load (region_load.cc) share: the device
// access check and the grouping of a request's blocks into copy batches.
// Internal to datapath/.
#ifndef KVTIER_DATAPATH_REGION_GROUPS_H_
#define KVTIER_DATAPATH_REGION_GROUPS_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "datapath/copy_engine.h"
#include "datapath/copy_workers.h"
#include "datapath/memory_region.h"
#include "datapath/region_copy.h"

namespace kvtier {

// Device regions need an engine that reaches device memory; and every range
// must lie in one allocation of the region.
absl::Status CheckDeviceAccess(MemoryRegion& region, absl::Span<const RegionBlock> blocks,
                               CopyEngine* engine);

// One past the last block of the group starting at `next`: at most
// kRegionCopyGroup blocks, and for device regions at most
// kDeviceStagingBytes (but always one block), all of one layer group.
size_t GroupEnd(absl::Span<const RegionBlock> blocks, size_t next, bool device);

// A group of at least this many bytes moves between the host tier and a
// host region on two threads (the call's and a helper): one thread's copy
// with the checksum fused in reaches about half of what the machine's
// memory moves, and a thread costs tens of microseconds to start.
inline constexpr uint64_t kTwoThreadGroupBytes = 2ull << 20;

// Runs part(0) on this thread and part(1) on another, and returns when
// both are done: on one of `workers` (copy_workers.h), or without them on a
// thread started for it; where no thread can be had, both on this thread.
void OnTwoThreads(CopyWorkers* workers, const std::function<void(size_t part)>& part);

// Runs block(part, k) once for each k in [0, count), on two threads as
// OnTwoThreads does (part 0 or 1: the thread running it, for state kept
// per thread), each thread taking the next k that neither has taken yet. A
// thread held up (by the VM's other work, a page fault) leaves more blocks
// to the other, where a fixed split would make the call wait for its
// half. block(part, k) must touch only k's own state and its part's; what
// it wrote is visible to the caller on return.
void ForEachOnTwoThreads(CopyWorkers* workers, size_t count,
                         const std::function<void(size_t part, size_t k)>& block);

}  // namespace kvtier

#endif  // KVTIER_DATAPATH_REGION_GROUPS_H_
