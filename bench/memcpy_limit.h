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

}  // namespace kvtier::bench

#endif  // KVTIER_BENCH_MEMCPY_LIMIT_H_
