// TuneHeapForMessages: glibc malloc settings for a process that allocates
// and frees message buffers of up to a few MiB on every call (gRPC's
// slices, protobuf's strings). By default glibc serves allocations of 128
// KiB and more with fresh mmaps and gives the top of its heap back to the
// kernel whenever 128 KiB lie free there, so each such buffer is faulted in
// page by page and released again: at 256 KiB Put/Get, page faults in
// memmove were the largest single cost (bench/put_get_rpc under perf). The
// settings keep up to 32 MiB allocations on the heap and keep 256 MiB of
// free heap (plus 16 MiB of padding per growth) before trimming: the heap
// holds on to what a burst of calls used, bounded by those figures beyond
// the live buffers. Process-wide, so kvtierd's main() calls it once (and
// the benchmarks, which run the daemon in-process).
#ifndef KVTIER_SERVER_HEAP_TUNING_H_
#define KVTIER_SERVER_HEAP_TUNING_H_

#include "absl/status/status.h"

namespace kvtier {

// INTERNAL if glibc refuses a setting (the others still apply).
absl::Status TuneHeapForMessages();

}  // namespace kvtier

#endif  // KVTIER_SERVER_HEAP_TUNING_H_
