// Happens-before edges for ThreadSanitizer across gRPC's callback API.
// Debian's gRPC is not built with TSan, so TSan cannot see how gRPC hands a
// call from the thread that starts an operation (StartRead, StartWrite,
// Finish, on a kvtier worker) to the thread that runs its reaction
// (OnReadDone, OnWriteDone, OnDone, on one of gRPC's). Each reactor of
// kvtier's own (the streaming calls') marks both ends on its own address:
// HandOff right before it gives gRPC an operation, TakeOver first thing in
// each reaction. A unary call has no reactor of kvtier's: it is finished
// through gRPC's library-owned one (server/async/unary_call.h), whose
// reactions are empty, and what runs after its Finish (the messages'
// teardown) is gRPC's header code (tests/tsan.supp). Outside TSan builds
// both are empty and free.
#ifndef KVTIER_SERVER_ASYNC_TSAN_HANDOFF_H_
#define KVTIER_SERVER_ASYNC_TSAN_HANDOFF_H_

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVTIER_TSAN_HANDOFF 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define KVTIER_TSAN_HANDOFF 1
#endif

#ifdef KVTIER_TSAN_HANDOFF
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace kvtier {

inline void HandOff(const void* call) {
#ifdef KVTIER_TSAN_HANDOFF
  __tsan_release(const_cast<void*>(call));
#else
  (void)call;
#endif
}

inline void TakeOver(const void* call) {
#ifdef KVTIER_TSAN_HANDOFF
  __tsan_acquire(const_cast<void*>(call));
#else
  (void)call;
#endif
}

}  // namespace kvtier

#endif  // KVTIER_SERVER_ASYNC_TSAN_HANDOFF_H_
