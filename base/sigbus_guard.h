// Copies that survive the memory under them vanishing. A shared-memory file
// that a client registers stays the client's: it may truncate the file while
// the daemon has it mapped, and the next access to a page past the new end
// raises SIGBUS, which would kill the daemon and every tenant's service with
// it. The functions here run one copy (or copy-and-hash) with SIGBUS turned
// into a `false` return for that call only; the caller reports the region as
// gone and touches nothing else.
//
// Mechanism: a SIGBUS handler, installed once (by the daemon at start, after
// the libraries that install their own, and at the latest on first use),
// that jumps back into
// the guarded call when the faulting thread is inside one and the faulting
// address lies in the range it declared; any other SIGBUS is handed to the
// handler that was installed before (by default: the process dies, as it
// should for a daemon bug). The jump leaves only memcpy, the hash's C code
// or base/hashed_copy's loops, which hold no locks and own nothing.
//
// Thread-safety: thread-safe; the guard is per thread. The signal handler is
// process-wide by nature: it is the one piece of global state, installed
// once and never removed.
#ifndef KVTIER_BASE_SIGBUS_GUARD_H_
#define KVTIER_BASE_SIGBUS_GUARD_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/checksum.h"

namespace kvtier {

// Installs the handler (idempotent), chaining to whatever handler is in
// place: call it after libraries that install SIGBUS handlers of their own.
void InstallSigbusGuard();

// memcpy(dst, src, n); false if it faulted with SIGBUS inside [guard_lo,
// guard_hi) (the region that may vanish), after copying an unspecified part.
bool GuardedCopy(void* dst, const void* src, size_t n, const void* guard_lo, size_t guard_size);

// CopyAndHash (base/hashed_copy.h: the bytes stored at `dst` are what gets
// hashed, even if `src` changes meanwhile), guarded as GuardedCopy (the
// guarded region may hold `src` or `dst`). On false the stream's state is
// unspecified: Reset it.
bool GuardedCopyAndHash(void* dst, const void* src, size_t n, Checksum64Stream& hash,
                        const void* guard_lo, size_t guard_size);

// memcmp(a, b, n) == 0 into *equal; false if it faulted as above.
bool GuardedEqual(const void* a, const void* b, size_t n, bool* equal, const void* guard_lo,
                  size_t guard_size);

// FAILED_PRECONDITION naming `what` (e.g. "block 0a1b"): the memory it was
// copied from or into vanished (its shared-memory file was truncated).
absl::Status VanishedMemoryError(absl::string_view what);

// How many SIGBUS faults the guard has turned into errors, process-wide.
uint64_t GuardedSigbusCount();

}  // namespace kvtier

#endif  // KVTIER_BASE_SIGBUS_GUARD_H_
