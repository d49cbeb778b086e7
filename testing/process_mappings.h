// The process's own memory mappings as /proc/self/smaps and /proc/self/maps
// tell them, for tests of code that maps memory. Test-only; header-only.
#ifndef KVTIER_TESTING_PROCESS_MAPPINGS_H_
#define KVTIER_TESTING_PROCESS_MAPPINGS_H_

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace kvtier::testing {

// The mapping holding an address.
struct Mapping {
  uintptr_t lo = 0, hi = 0;
  std::string flags;  // VmFlags, space-separated with a space at the end; "" if none
};

inline Mapping MappingOf(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  Mapping m;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2) {  // a mapping's first line
      inside = lo <= at && at < hi;
      if (inside) m = {lo, hi, ""};
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      m.flags = line.substr(8) + " ";
      return m;
    }
  }
  return {};
}

inline std::string VmFlagsOf(const void* p) { return MappingOf(p).flags; }

// Bytes of all the process's mappings but the brk heap (which the reads of
// /proc themselves may grow).
inline uint64_t MappedBytes() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  uint64_t total = 0;
  while (std::getline(maps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (line.find("[heap]") == std::string::npos &&
        std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2) {
      total += hi - lo;
    }
  }
  return total;
}

}  // namespace kvtier::testing

#endif  // KVTIER_TESTING_PROCESS_MAPPINGS_H_
