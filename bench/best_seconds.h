// BestSeconds: the fastest of `rounds` timed runs of f (after one untimed
// warm-up run when asked), for benchmarks that compare against a baseline
// timed the same way.
#ifndef KVTIER_BENCH_BEST_SECONDS_H_
#define KVTIER_BENCH_BEST_SECONDS_H_

#include <algorithm>
#include <chrono>

namespace kvtier::bench {

template <typename F>
double BestSeconds(int rounds, F f, bool warm_up = false) {
  using Clock = std::chrono::steady_clock;
  if (warm_up) f();
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    const auto a = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - a).count());
  }
  return best;
}

}  // namespace kvtier::bench

#endif  // KVTIER_BENCH_BEST_SECONDS_H_
