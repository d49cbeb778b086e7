// Block copies with the block checksum fused in, at memory speed.
//
// A plain memcpy followed by a hash of the copy reads the source, writes the
// destination through the cache (each line read before it is written) and
// hashes the copy while it is still cached: three passes' worth of memory
// traffic for two. CopyAndHash reads each source byte once, into registers,
// and stores it twice: with non-temporal (streaming) stores to the
// destination, which write whole lines without reading them, and to a
// small bounce buffer in the first-level cache, which the hash then reads.
// Memory sees one read of the source and one write of the destination.
//
// The destination and the bounce buffer are stored from the same registers,
// so the checksum describes exactly the bytes stored even when the source
// changes during the copy (a client's shared memory, a Put's bytes), and
// exactly the bytes delivered when it does not (a cache slot pinned by a
// read handle, whose stored checksum it verifies).
//
// Every call ends with a store fence: its bytes are visible to other threads
// before anything the caller publishes afterwards. Without non-temporal
// stores on the CPU (non-x86), the copies are memcpys through the bounce
// buffer.
//
// Thread-safety: pure functions of their arguments; `hash` is the caller's.
#ifndef KVTIER_BASE_HASHED_COPY_H_
#define KVTIER_BASE_HASHED_COPY_H_

#include <cstddef>

#include "base/checksum.h"

namespace kvtier {

// The piece hashed at a time: its bounce buffer stays in the first-level
// data cache beside the lines in flight (4 KiB measured fastest of 2-16 KiB).
inline constexpr size_t kHashedCopyPiece = 4 * 1024;

// memcpy(dst, src, n) with non-temporal stores; the ranges must not overlap.
void StreamCopy(void* dst, const void* src, size_t n);

// Orders this thread's earlier streaming stores before its later stores (the
// fence every call here ends with): for a caller that left one early.
void StoreFence();

// Copies n bytes and feeds the bytes stored at `dst` to `hash`; `src` is
// read once. The ranges must not overlap.
void CopyAndHash(void* dst, const void* src, size_t n, Checksum64Stream& hash);

}  // namespace kvtier

#endif  // KVTIER_BASE_HASHED_COPY_H_
