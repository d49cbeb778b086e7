// A deliberate data race, run only in the ThreadSanitizer build: its test
// passes when TSan reports it, so a TSan job that has stopped seeing races
// (a suppression too broad, a build without the sanitizer) fails instead of
// passing silently. The same counter under kvtier::Mutex is race-free
// (MutexTest.GuardsACounterAcrossThreads, also run under TSan).
//
// The two writes are ordered in time by a relaxed atomic flag, which gives
// no happens-before edge: TSan must report the pair on every run. (Two
// threads incrementing at the same instant, as this canary first did, can
// slip past TSan's shadow-memory update; one fresh-clone run printed 1000
// and no report.)
#include <atomic>
#include <cstdio>
#include <thread>

namespace {
int unguarded = 0;
std::atomic<bool> first_done{false};
}  // namespace

int main() {
  std::thread a([] {
    unguarded = 1;
    first_done.store(true, std::memory_order_relaxed);
  });
  std::thread b([] {
    while (!first_done.load(std::memory_order_relaxed)) std::this_thread::yield();
    unguarded = 2;
  });
  a.join();
  b.join();
  std::printf("%d\n", unguarded);
  return 0;
}
