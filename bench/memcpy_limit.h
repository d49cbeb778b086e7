// BestMemcpy: the machine's copy limit for one copy shape, measured in the
// run that uses it as a baseline: `bytes` from `src` to `dst` (both warmed
// first) in `block`-sized copies, split into contiguous shares over 1 to
// `max_threads` threads, each copy either a memcpy or a streaming copy
// (non-temporal stores, base/hashed_copy.h: glibc's memcpy streams only
// copies larger than most of the last-level cache, and on a machine with a
// large one a streaming copy of a few MiB outruns it). Each thread count and
// copy kind is timed `rounds` times and the fastest run of all is the limit:
// a data path that copies with several workers, or with streaming stores,
// is compared against the best any of them achieves.
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
#include "base/hashed_copy.h"

namespace kvtier::bench {

struct MemcpyLimit {
  double gbps = 0;         // 1e9 bytes per second
  int threads = 0;         // the thread count that reached it
  bool streaming = false;  // whether with streaming stores (else memcpy)
};

inline MemcpyLimit BestMemcpy(const uint8_t* src, uint8_t* dst, uint64_t bytes, uint64_t block,
                              int rounds, int max_threads) {
  using Clock = std::chrono::steady_clock;
  const uint64_t blocks = bytes / block;
  std::memcpy(dst, src, blocks * block);  // warm both buffers (page faults, TLB)
  MemcpyLimit best;
  for (int t = 1; t <= std::max(1, max_threads); ++t) {
    for (int r = 0; r < 2 * rounds; ++r) {
      const bool streaming = r % 2 == 1;
      std::atomic<bool> go{false};
      std::vector<std::thread> workers;
      for (int w = 0; w < t; ++w) {
        workers.emplace_back([&, w] {
          const uint64_t first = blocks * w / t, last = blocks * (w + 1) / t;
          while (!go.load(std::memory_order_acquire)) {
          }
          for (uint64_t b = first; b < last; ++b) {
            if (streaming) {
              StreamCopy(dst + b * block, src + b * block, block);
            } else {
              std::memcpy(dst + b * block, src + b * block, block);
            }
          }
        });
      }
      const auto t0 = Clock::now();
      go.store(true, std::memory_order_release);
      for (std::thread& w : workers) w.join();
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      const double gbps = static_cast<double>(blocks * block) / s / 1e9;
      if (gbps > best.gbps) best = {gbps, t, streaming};
    }
  }
  return best;
}

// One thread's copy with the block checksum fused in, as the daemon's Save
// and Load do per block (base/hashed_copy.h: CopyAndHash, 64 KiB at a time): `bytes`
// from `src` to `dst` in `block`-sized blocks, each with its own XXH3-64; the
// fastest of `rounds`, in 1e9 bytes per second. Not the limit: the reference
// that tells how much of a gap to it is the checksum and how much is the
// thread count.
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
        CopyAndHash(dst + b * block + at, src + b * block + at, n, hash);
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
