// CopyEngine: moves batches of byte ranges between host memory and GPU
// memory. A batch is many copies (the chunks of engine KV blocks, say) that
// complete together: one completion per batch, never one per chunk, because
// per-copy overhead is what caps block movement (a cudaMemcpyAsync per 32 KiB
// chunk costs more than the chunk's transfer).
//
// The interface is owned by storage so that the daemon's data path can move
// bytes without knowing which backend does it. Backends live in gpu/: a CPU
// backend (memcpy worker threads; host memory only) and a CUDA backend
// (dedicated streams per direction, one gather kernel launch per batch). The
// backend is chosen at runtime by gpu/CreateCopyEngine: a binary built with
// CUDA runs on a machine without a GPU and uses the CPU backend.
//
// Thread-safety: every method may be called from any thread. `done` runs on
// an engine thread, exactly once per accepted batch, and must not block on
// the engine itself (no CopySync from inside `done`).
#ifndef KVTIER_DATAPATH_COPY_ENGINE_H_
#define KVTIER_DATAPATH_COPY_ENGINE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/mutex.h"

namespace kvtier {

// Where a batch's pointers live. Device pointers belong to `CopyBatch::device`.
enum class MemoryKind { kHost, kDevice };

struct CopyOp {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};

struct CopyBatch {
  MemoryKind src_kind = MemoryKind::kHost;
  MemoryKind dst_kind = MemoryKind::kHost;
  int device = 0;  // the GPU of any device pointers
  std::vector<CopyOp> ops;

  uint64_t TotalBytes() const {
    uint64_t n = 0;
    for (const CopyOp& op : ops) n += op.bytes;
    return n;
  }
};

struct CopyEngineCapabilities {
  std::string name;            // "cpu" or "cuda"
  bool device_memory = false;  // accepts MemoryKind::kDevice
  int device_count = 0;
  int worker_threads = 0;  // CPU backend: memcpy threads
  // Why device memory is not available, when it is not ("no GPU (...)").
  std::string detail;
  int device = -1;  // the GPU whose memory it reaches; -1 for none
};

using CopyDone = std::function<void(absl::Status)>;

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;

  virtual CopyEngineCapabilities Capabilities() const = 0;

  // Validates and enqueues `batch`. A returned error means nothing was
  // copied and `done` will not run: INVALID_ARGUMENT for a null pointer or
  // overlapping source and destination of one op, FAILED_PRECONDITION for a
  // memory kind this engine cannot reach. Otherwise `done` runs once all ops
  // finished, with OK or the first copy error. An empty batch completes OK.
  virtual absl::Status Submit(CopyBatch batch, CopyDone done) = 0;

  // Makes `bytes` at `p` fast to copy to and from devices (cudaHostRegister
  // for the host arena, once at start). The CPU backend accepts and ignores
  // it. Unregister before freeing the memory.
  virtual absl::Status RegisterHost(void* p, size_t bytes) = 0;
  virtual absl::Status UnregisterHost(void* p) = 0;

  // Submit and wait for the completion.
  absl::Status CopySync(CopyBatch batch) {
    Notification finished;
    absl::Status result;
    absl::Status s = Submit(std::move(batch), [&](absl::Status st) {
      result = std::move(st);
      finished.Notify();
    });
    if (!s.ok()) return s;
    finished.WaitForNotification();
    return result;
  }
};

// The checks every backend applies before accepting a batch (see Submit).
absl::Status ValidateCopyBatch(const CopyBatch& batch);

}  // namespace kvtier

#endif  // KVTIER_DATAPATH_COPY_ENGINE_H_
