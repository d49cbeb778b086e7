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

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
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

// Seconds for copy(b, w) over blocks b in [0, blocks), split into
// contiguous shares over `threads` threads (w: the share's index). This
// thread copies share 0 and starts the others first, spinning until it
// releases them with the clock started: no more threads are runnable than
// copy (one more, on a machine with as many CPUs as threads, could take a
// copier's CPU for a scheduler time slice inside the timed span). Each
// share's thread is held to a CPU of its own (this thread's mask is
// restored after): a started thread may otherwise be placed on its
// starter's busy CPU (datapath/copy_workers.h saw it on this VM) and the
// shares then run one after the other.
template <typename CopyBlock>
double TimedOnThreads(int threads, uint64_t blocks, const CopyBlock& copy) {
  cpu_set_t allowed;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    }
  }
  const auto hold = [&](int w) {  // a failure leaves the scheduler's choice
    if (cpus.empty()) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[w % cpus.size()], &one);
    sched_setaffinity(0, sizeof(one), &one);
  };
  std::atomic<bool> go{false};
  const auto share = [&](int w) {
    const uint64_t first = blocks * w / threads, last = blocks * (w + 1) / threads;
    for (uint64_t b = first; b < last; ++b) copy(b, w);
  };
  hold(0);
  std::vector<std::thread> workers;
  for (int w = 1; w < threads; ++w) {
    workers.emplace_back([&, w] {
      hold(w);
      while (!go.load(std::memory_order_acquire)) {
      }
      share(w);
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  share(0);
  for (std::thread& w : workers) w.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!cpus.empty()) sched_setaffinity(0, sizeof(allowed), &allowed);
  return seconds;
}

inline MemcpyLimit BestMemcpy(const uint8_t* src, uint8_t* dst, uint64_t bytes, uint64_t block,
                              int rounds, int max_threads) {
  const uint64_t blocks = bytes / block;
  std::memcpy(dst, src, blocks * block);  // warm both buffers (page faults, TLB)
  MemcpyLimit best;
  for (int t = 1; t <= std::max(1, max_threads); ++t) {
    for (int r = 0; r < 2 * rounds; ++r) {
      const bool streaming = r % 2 == 1;
      const double s = TimedOnThreads(t, blocks, [&](uint64_t b, int) {
        if (streaming) {
          StreamCopy(dst + b * block, src + b * block, block);
        } else {
          std::memcpy(dst + b * block, src + b * block, block);
        }
      });
      const double gbps = static_cast<double>(blocks * block) / s / 1e9;
      if (gbps > best.gbps) best = {gbps, t, streaming};
    }
  }
  return best;
}

// The copy with the block checksum fused in, as the daemon's Save and Load
// do per block (base/hashed_copy.h: CopyAndHash, 64 KiB at a time): `bytes`
// from `src` to `dst` in `block`-sized blocks, each with its own XXH3-64,
// over 1 to `max_threads` threads as BestMemcpy's copies; the fastest run
// of `rounds` per thread count. Not the limit: the reference that tells how
// much of a gap to it is the checksum (the daemon copies a group on two
// threads; on a machine whose cores share their execution units or memory
// path, two threads' fused copies gain less over one than two memcpys do)
// and how much is the daemon's own cost.
inline MemcpyLimit BestCopyAndHash(const uint8_t* src, uint8_t* dst, uint64_t bytes, uint64_t block,
                                   int rounds, int max_threads) {
  constexpr uint64_t kPiece = 64 << 10;
  const uint64_t blocks = bytes / block;
  std::memcpy(dst, src, blocks * block);
  MemcpyLimit best;
  for (int t = 1; t <= std::max(1, max_threads); ++t) {
    // One stream per thread, reset per block, as the daemon keeps them.
    const std::unique_ptr<Checksum64Stream[]> hashes(new Checksum64Stream[t]);
    for (int r = 0; r < rounds; ++r) {
      const double s = TimedOnThreads(t, blocks, [&](uint64_t b, int w) {
        Checksum64Stream& hash = hashes[w];
        hash.Reset();
        for (uint64_t at = 0; at < block; at += kPiece) {
          const uint64_t n = std::min(kPiece, block - at);
          CopyAndHash(dst + b * block + at, src + b * block + at, n, hash);
        }
        (void)hash.Digest();  // out of line (base/checksum.cc): not optimized away
      });
      const double gbps = static_cast<double>(blocks * block) / s / 1e9;
      if (gbps > best.gbps) best = {gbps, t, false};
    }
  }
  return best;
}

}  // namespace kvtier::bench

#endif  // KVTIER_BENCH_MEMCPY_LIMIT_H_
