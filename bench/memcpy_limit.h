// BestMemcpy: the machine's copy limit for one copy shape, measured in the
// run that uses it as a baseline: `bytes` from `src` to `dst` (both warmed
// first) in `block`-sized copies over 1 to `max_threads` threads
// (TimedOnThreads), each copy either a memcpy or a streaming copy
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

// Seconds for copy(b, w) over blocks b in [0, blocks) on `threads` threads
// (w: the thread's index), each taking the next block not yet taken, as
// the daemon's two-thread copies do (datapath/region_groups.h:
// ForEachOnTwoThreads). This thread copies too; the others are started,
// each held to a CPU of its own (where there are at least as many CPUs as
// threads, and more than one thread), and spin until all are in place
// before the clock starts and they are released: no thread start-up is
// timed, and no copier shares its CPU with another thread (a started
// thread may otherwise be placed on its starter's busy CPU, as
// datapath/copy_workers.h saw on this VM). This thread's CPU mask is
// restored after.
template <typename CopyBlock>
double TimedOnThreads(int threads, uint64_t blocks, const CopyBlock& copy) {
  cpu_set_t allowed;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    }
  }
  // One thread alone is left where the scheduler puts it: CPUs of a VM
  // differ in speed (the host's other load), and pinning it to the first
  // would make it the slowest one's figure.
  const bool pin = threads > 1 && static_cast<size_t>(threads) <= cpus.size();
  const auto hold = [&](int w) {  // a failure leaves the scheduler's choice
    if (!pin) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[w], &one);
    sched_setaffinity(0, sizeof(one), &one);
  };
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<uint64_t> next{0};
  const auto take_blocks = [&](int w) {
    for (uint64_t b = next.fetch_add(1, std::memory_order_relaxed); b < blocks;
         b = next.fetch_add(1, std::memory_order_relaxed)) {
      copy(b, w);
    }
  };
  // Started before this thread is held to its CPU, so they inherit its
  // whole mask and can start elsewhere.
  std::vector<std::thread> workers;
  for (int w = 1; w < threads; ++w) {
    workers.emplace_back([&, w] {
      hold(w);
      ready.fetch_add(1, std::memory_order_release);
      while (!go.load(std::memory_order_acquire)) {
      }
      take_blocks(w);
    });
  }
  hold(0);
  while (ready.load(std::memory_order_acquire) < threads - 1) {
  }
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  take_blocks(0);
  for (std::thread& w : workers) w.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (pin) sched_setaffinity(0, sizeof(allowed), &allowed);
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
// on one and on two threads (at most `max_threads`) as BestMemcpy's copies
// run (the daemon copies a group on at most two); the fastest run of
// `rounds` per thread count. Not the limit: the reference that tells how
// much of a gap to it is the checksum (on a machine whose cores share their
// execution units or memory path, two threads' fused copies gain less over
// one than two memcpys do) and how much is the daemon's own cost.
inline MemcpyLimit BestCopyAndHash(const uint8_t* src, uint8_t* dst, uint64_t bytes, uint64_t block,
                                   int rounds, int max_threads) {
  constexpr uint64_t kPiece = 64 << 10;
  const uint64_t blocks = bytes / block;
  std::memcpy(dst, src, blocks * block);
  MemcpyLimit best;
  for (int t = 1; t <= std::clamp(max_threads, 1, 2); ++t) {
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
