#include "base/available_memory.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kvtier {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A number file's value; nullopt for "max" (v2's unlimited) or anything else.
std::optional<uint64_t> NumberIn(const std::optional<std::string>& text) {
  uint64_t v = 0;
  if (!text.has_value() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &v)) {
    return std::nullopt;
  }
  return v;
}

// One hierarchy's view of the process's memory cgroup: where the hierarchy
// is mounted and the cgroup's path in it, and the names of its files.
struct Hierarchy {
  std::string root, path, limit, usage;
};

// The least limit less usage of the cgroup at `dir` and of every ancestor up
// to `root` (the kernel charges each of them for the process's pages);
// nullopt when `dir` holds no cgroup, or none of them has these files.
std::optional<uint64_t> HeadroomUpFrom(const std::string& dir, const Hierarchy& h,
                                       const FileReader& read) {
  std::optional<uint64_t> least;
  for (std::string at = dir; at.size() >= h.root.size(); at.resize(at.rfind('/'))) {
    const std::optional<std::string> limit_text = read(at + "/" + h.limit);
    const std::optional<uint64_t> usage = NumberIn(read(at + "/" + h.usage));
    if (!limit_text.has_value() || !usage.has_value()) {
      // Not this place, unless a cgroup is there without the memory
      // controller (the kernel charges the nearest ancestor that has it).
      if (at == dir && !read(dir + "/cgroup.procs").has_value()) return std::nullopt;
      continue;  // as v2's root cgroup, which has no limit file
    }
    const std::optional<uint64_t> limit = NumberIn(limit_text);
    // "max", or v1's "no limit" (a page-rounded 2^63 - 1): unlimited here.
    const uint64_t headroom = !limit.has_value() || *limit >= (uint64_t{1} << 62) ? UINT64_MAX
                              : *limit > *usage                                   ? *limit - *usage
                                                                                  : 0;
    least = std::min(least.value_or(UINT64_MAX), headroom);
    if (at == h.root) break;
  }
  return least;
}

}  // namespace

uint64_t CgroupHeadroom(const std::string& proc_self_cgroup, const FileReader& read) {
  std::vector<Hierarchy> hierarchies;
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n', absl::SkipEmpty())) {
    // "hierarchy-id:controllers:path"; v2's is "0::path".
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || !absl::StartsWith(f[2], "/")) continue;
    std::string path(absl::StripSuffix(f[2], "/"));
    // Outside this cgroup namespace's root ("/../.."): only the root is known.
    if (absl::StrContains(path + "/", "/../") || absl::StrContains(path, "//")) path.clear();
    if (f[0] == "0" && f[1].empty()) {
      hierarchies.push_back({"/sys/fs/cgroup", path, "memory.max", "memory.current"});
    } else {
      for (absl::string_view c : absl::StrSplit(f[1], ',')) {
        if (c != "memory") continue;
        hierarchies.push_back(
            {"/sys/fs/cgroup/memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes"});
      }
    }
  }
  for (const Hierarchy& h : hierarchies) {
    // By the cgroup's path; else at the root, as a container sees its own.
    for (const std::string& dir : {h.root + h.path, h.root}) {
      if (const std::optional<uint64_t> headroom = HeadroomUpFrom(dir, h, read)) return *headroom;
    }
  }
  return UINT64_MAX;
}

uint64_t AvailableMemoryBytes() {
  uint64_t available = UINT64_MAX;
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) {
      available = kib * 1024;
      break;
    }
  }
  const std::optional<std::string> cgroup = ReadFile("/proc/self/cgroup");
  if (!cgroup.has_value()) return available;
  return std::min(available, CgroupHeadroom(*cgroup, ReadFile));
}

}  // namespace kvtier
