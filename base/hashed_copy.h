// Block copies with the block checksum fused in, at memory speed.
//
// A plain memcpy followed by a hash of the copy reads the source, writes the
// destination through the cache (each line read before it is written) and
// hashes the copy while it is still cached: three passes' worth of memory
// traffic for two. The copies here store with non-temporal (streaming)
// stores, which write whole lines without reading them, and hash each piece
// while it sits in the first-level cache, so memory sees one read of the
// source and one write of the destination.
//
// Which to use depends on whether the source can change during the copy:
// - CopyAndHash, for a source that may change under the copy (a client's
//   shared memory, a Put's bytes): each piece goes through a small bounce
//   buffer first, and the hash and the destination both come from that
//   buffer, so the checksum describes exactly the bytes stored.
// - HashAndCopy, for a source that cannot change (a cache slot pinned by a
//   read handle): the hash reads the source, then the stores copy it from
//   the cache; the checksum verifies the bytes the copy came from.
//
// Every call ends with a store fence: its bytes are visible to other threads
// before anything the caller publishes afterwards. Without non-temporal
// stores on the CPU (non-x86), the streaming copy is a memcpy.
//
// Thread-safety: pure functions of their arguments; `hash` is the caller's.
#ifndef KVTIER_BASE_HASHED_COPY_H_
#define KVTIER_BASE_HASHED_COPY_H_

#include <cstddef>

#include "base/checksum.h"

namespace kvtier {

// The piece hashed at a time, which fits a first-level data cache.
inline constexpr size_t kHashedCopyPiece = 16 * 1024;

// memcpy(dst, src, n) with non-temporal stores; the ranges must not overlap.
void StreamCopy(void* dst, const void* src, size_t n);

// Orders this thread's earlier streaming stores before its later stores (the
// fence every call here ends with): for a caller that left one early.
void StoreFence();

// Copies n bytes and feeds the bytes stored at `dst` to `hash`.
void CopyAndHash(void* dst, const void* src, size_t n, Checksum64Stream& hash);

// Feeds the n bytes at `src` to `hash` and copies them; `src` must not change
// during the call.
void HashAndCopy(void* dst, const void* src, size_t n, Checksum64Stream& hash);

}  // namespace kvtier

#endif  // KVTIER_BASE_HASHED_COPY_H_
