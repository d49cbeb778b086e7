// BestMemcpy: the machine's copy limit for one copy shape, measured in the
// run that uses it as a baseline: `bytes` from `src` to `dst` (both warmed
// first) in `block`-sized memcpy calls, split into contiguous shares over 1
// to `max_threads` threads; each thread count is timed `rounds` times and the
// fastest run of all is the limit. A data path that copies with several
// workers is compared against the best any number of threads achieves, not
// against one thread's memcpy.
#ifndef KVTIER_BENCH_MEMCPY_LIMIT_H_
#define KVTIER_BENCH_MEMCPY_LIMIT_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "base/checksum.h"

namespace kvtier::bench {

struct MemcpyLimit {
  double gbps = 0;  // 1e9 bytes per second
  int threads = 0;  // the thread count that reached it
};

inline MemcpyLimit BestMemcpy(const uint8_t* src, uint8_t* dst, uint64_t bytes, uint64_t block,
                              int rounds, int max_threads) {
  using Clock = std::chrono::steady_clock;
  const uint64_t blocks = bytes / block;
  std::memcpy(dst, src, blocks * block);  // warm both buffers (page faults, TLB)
  MemcpyLimit best;
  for (int t = 1; t <= std::max(1, max_threads); ++t) {
    for (int r = 0; r < rounds; ++r) {
      std::atomic<bool> go{false};
      std::vector<std::thread> workers;
      for (int w = 0; w < t; ++w) {
        workers.emplace_back([&, w] {
          const uint64_t first = blocks * w / t, last = blocks * (w + 1) / t;
          while (!go.load(std::memory_order_acquire)) {
          }
          for (uint64_t b = first; b < last; ++b) {
            std::memcpy(dst + b * block, src + b * block, block);
          }
        });
      }
      const auto t0 = Clock::now();
      go.store(true, std::memory_order_release);
      for (std::thread& w : workers) w.join();
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      const double gbps = static_cast<double>(blocks * block) / s / 1e9;
      if (gbps > best.gbps) best = {gbps, t};
    }
  }
  return best;
}

// One thread's copy with the block checksum fused in, as the daemon's Save
// and Load do per block (copy a 64 KiB piece, hash it while it is in cache):
// `bytes` from `src` to `dst` in `block`-sized blocks, each with its own
// XXH3-64; the fastest of `rounds`, in 1e9 bytes per second. Not the limit:
// the reference that tells how much of a gap to it is the checksum and how
// much is the thread count.
inline double OneThreadCopyAndHash(const uint8_t* src, uint8_t* dst, uint64_t bytes, uint64_t block,
                                   int rounds) {
  using Clock = std::chrono::steady_clock;
  constexpr uint64_t kPiece = 64 << 10;
  const uint64_t blocks = bytes / block;
  std::memcpy(dst, src, blocks * block);
  Checksum64Stream hash;
  double best = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    for (uint64_t b = 0; b < blocks; ++b) {
      hash.Reset();
      for (uint64_t at = 0; at < block; at += kPiece) {
        const uint64_t n = std::min(kPiece, block - at);
        std::memcpy(dst + b * block + at, src + b * block + at, n);
        hash.Update({dst + b * block + at, n});
      }
      (void)hash.Digest();  // out of line (base/checksum.cc): not optimized away
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(blocks * block) / s / 1e9);
  }
  return best;
}

}  // namespace kvtier::bench

#endif  // KVTIER_BENCH_MEMCPY_LIMIT_H_
