#include "base/available_memory.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

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

}  // namespace

uint64_t CgroupHeadroom(const std::string& proc_self_cgroup,
                        const std::function<std::optional<std::string>(const std::string&)>& read) {
  struct Place {
    std::string dir, limit, usage;
  };
  std::vector<Place> places;
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n', absl::SkipEmpty())) {
    // "hierarchy-id:controllers:path"; v2's is "0::path".
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    const std::string path(f[2] == "/" ? "" : f[2]);
    if (f[0] == "0" && f[1].empty()) {
      for (const std::string& dir : {"/sys/fs/cgroup" + path, std::string("/sys/fs/cgroup")}) {
        places.push_back({dir, "memory.max", "memory.current"});
      }
    } else {
      for (absl::string_view c : absl::StrSplit(f[1], ',')) {
        if (c != "memory") continue;
        for (const std::string& dir :
             {"/sys/fs/cgroup/memory" + path, std::string("/sys/fs/cgroup/memory")}) {
          places.push_back({dir, "memory.limit_in_bytes", "memory.usage_in_bytes"});
        }
      }
    }
  }
  for (const Place& p : places) {
    const std::optional<std::string> limit_text = read(p.dir + "/" + p.limit);
    const std::optional<uint64_t> usage = NumberIn(read(p.dir + "/" + p.usage));
    if (!limit_text.has_value() || !usage.has_value()) continue;  // not this place
    const std::optional<uint64_t> limit = NumberIn(limit_text);
    // "max", or v1's "no limit" (a page-rounded 2^63 - 1): unlimited.
    if (!limit.has_value() || *limit >= (uint64_t{1} << 62)) return UINT64_MAX;
    return *limit > *usage ? *limit - *usage : 0;
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
