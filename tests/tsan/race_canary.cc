// A deliberate data race, run only in the ThreadSanitizer build: its test
// passes when TSan reports it, so a TSan job that has stopped seeing races
// (a suppression too broad, a build without the sanitizer) fails instead of
// passing silently. The same counter under kvtier::Mutex is race-free
// (MutexTest.GuardsACounterAcrossThreads, also run under TSan).
#include <cstdio>
#include <thread>

namespace {
int unguarded = 0;
}

int main() {
  std::thread a([] {
    for (int i = 0; i < 1000; ++i) ++unguarded;
  });
  std::thread b([] {
    for (int i = 0; i < 1000; ++i) ++unguarded;
  });
  a.join();
  b.join();
  std::printf("%d\n", unguarded);
  return 0;
}
