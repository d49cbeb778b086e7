// AvailableMemoryBytes: how much more memory this process can commit
// without the kernel swapping or its OOM killer acting: the smaller of the
// kernel's estimate (MemAvailable in /proc/meminfo) and what the process's
// memory cgroup still allows (its limit less its usage, cgroup v2 or v1).
// In a container MemAvailable is the host's; the cgroup is the container's.
//
// CgroupHeadroom is the cgroup half, over a file reader, for tests.
//
// Thread-safety: thread-safe (reads files, keeps no state).
#ifndef KVTIER_BASE_AVAILABLE_MEMORY_H_
#define KVTIER_BASE_AVAILABLE_MEMORY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace kvtier {

// UINT64_MAX where neither figure is known.
uint64_t AvailableMemoryBytes();

// A file's contents, or nullopt.
using FileReader = std::function<std::optional<std::string>(const std::string&)>;

// What the memory cgroup that `proc_self_cgroup` (the text of
// /proc/self/cgroup) names, and each of its ancestors, still allows: the
// least of their limits less their usages, read through `read`. Looks for
// the cgroup's directory under /sys/fs/cgroup (v2: memory.max,
// memory.current) or /sys/fs/cgroup/memory (v1: memory.limit_in_bytes,
// memory.usage_in_bytes), by its path and, as a container sees its own
// cgroup, at the hierarchy's root; then walks up to that root. UINT64_MAX
// when none is limited or none is found; 0 when one's usage has reached its
// limit.
uint64_t CgroupHeadroom(const std::string& proc_self_cgroup, const FileReader& read);

}  // namespace kvtier

#endif  // KVTIER_BASE_AVAILABLE_MEMORY_H_
