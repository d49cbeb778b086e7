// DiskStats: the kernel's I/O counters (/proc/diskstats) of the block device
// that holds a path, so a benchmark can show that two sides issued the same
// device I/O (requests, bytes, cache flushes), not only the same syscalls.
// Header-only; benchmarks only.
#ifndef KVTIER_BENCH_DISK_STATS_H_
#define KVTIER_BENCH_DISK_STATS_H_

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace kvtier {

struct DiskStats {
  uint64_t reads = 0;          // read requests completed
  uint64_t read_sectors = 0;   // 512-byte sectors read
  uint64_t writes = 0;         // write requests completed
  uint64_t write_sectors = 0;  // 512-byte sectors written
  uint64_t flushes = 0;        // cache flush requests completed (kernel >= 5.5)

  DiskStats operator-(const DiskStats& o) const {
    return {reads - o.reads, read_sectors - o.read_sectors, writes - o.writes,
            write_sectors - o.write_sectors, flushes - o.flushes};
  }

  // The counters of the device holding `path` (its partition's line), or
  // nullopt where there is none (tmpfs, overlay without a block device).
  static std::optional<DiskStats> Of(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return std::nullopt;
    std::ifstream in("/proc/diskstats");
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      unsigned maj = 0, min = 0;
      std::string name;
      uint64_t v[17] = {};
      f >> maj >> min >> name;
      int n = 0;
      while (n < 17 && f >> v[n]) ++n;
      if (maj != major(st.st_dev) || min != minor(st.st_dev) || n < 11) continue;
      // Fields after the name: reads, merged, sectors, ms, writes, merged,
      // sectors, ms, in flight, io ms, weighted ms, (discards x4), flushes, ms.
      return DiskStats{v[0], v[2], v[4], v[6], n >= 16 ? v[15] : 0};
    }
    return std::nullopt;
  }
};

}  // namespace kvtier

#endif  // KVTIER_BENCH_DISK_STATS_H_
