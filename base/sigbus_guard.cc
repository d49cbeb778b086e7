#include "base/sigbus_guard.h"

#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/hashed_copy.h"

namespace kvtier {
namespace {

// The guarded call of this thread, or null.
struct Guard {
  sigjmp_buf jump;
  uintptr_t lo = 0;
  uintptr_t hi = 0;
};
thread_local Guard* current_guard = nullptr;

struct sigaction previous_action;
std::atomic<uint64_t> caught{0};

void OnSigbus(int sig, siginfo_t* info, void* context) {
  Guard* g = current_guard;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  // si_code > 0: a fault of this thread's own access (not a kill(2)).
  if (g != nullptr && info->si_code > 0 && addr >= g->lo && addr < g->hi) {
    current_guard = nullptr;
    caught.fetch_add(1, std::memory_order_relaxed);
    siglongjmp(g->jump, 1);
  }
  // Not ours: behave as if this handler had never been installed.
  if (previous_action.sa_flags & SA_SIGINFO) {
    previous_action.sa_sigaction(sig, info, context);
    return;
  }
  if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(sig);
    return;
  }
  // The default action (also for an ignored SIGBUS: a fault cannot be
  // ignored, it would repeat forever): die of SIGBUS with a truthful core.
  // Synchronously raised, the access repeats once the default is back; sent
  // by kill(2), it is raised again.
  ::signal(SIGBUS, SIG_DFL);
  if (info->si_code <= 0) ::raise(SIGBUS);
}

}  // namespace

void InstallSigbusGuard() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &previous_action);
  });
}

namespace {

// Runs fn() with SIGBUS in [lo, lo + size) turned into `false`. fn must not
// own anything that needs destroying: a fault leaves it by a jump.
template <typename Fn>
bool RunGuarded(const void* lo, size_t size, Fn&& fn) {
  InstallSigbusGuard();
  Guard guard;
  guard.lo = reinterpret_cast<uintptr_t>(lo);
  guard.hi = guard.lo + size;
  // savemask 0: no system call per copy. After a jump SIGBUS is not blocked
  // (SA_NODEFER), so the mask needs no restoring.
  if (sigsetjmp(guard.jump, 0) != 0) {
    StoreFence();  // the jump skipped the copy's own fence
    return false;
  }
  current_guard = &guard;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  fn();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  current_guard = nullptr;
  return true;
}

}  // namespace

bool GuardedCopy(void* dst, const void* src, size_t n, const void* guard_lo, size_t guard_size) {
  return RunGuarded(guard_lo, guard_size, [&] { std::memcpy(dst, src, n); });
}

bool GuardedCopyAndHash(void* dst, const void* src, size_t n, Checksum64Stream& hash,
                        const void* guard_lo, size_t guard_size) {
  return RunGuarded(guard_lo, guard_size, [&] { CopyAndHash(dst, src, n, hash); });
}

bool GuardedEqual(const void* a, const void* b, size_t n, bool* equal, const void* guard_lo,
                  size_t guard_size) {
  return RunGuarded(guard_lo, guard_size, [&] { *equal = std::memcmp(a, b, n) == 0; });
}

absl::Status VanishedMemoryError(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      what, ": the shared memory it was copied with shrank under the daemon (its file ",
      "was truncated); nothing was stored or loaded from it, re-register the region"));
}

uint64_t GuardedSigbusCount() { return caught.load(std::memory_order_relaxed); }

}  // namespace kvtier
