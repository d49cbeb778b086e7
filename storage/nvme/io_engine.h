// IoEngine: the storage engine's seam to the OS for block I/O. Callers hand
// it batches of reads and writes of aligned buffers at offsets of registered
// files (opened with O_DIRECT for the NVMe tier) and get one status per
// operation. Implementations: pread/pwrite (PosixIoEngine, always present)
// and io_uring (UringIoEngine, when built with KVTIER_WITH_URING and allowed
// by the kernel); CreateIoEngine picks at runtime. Tests wrap an engine to
// inject faults.
//
// Thread-safety: RegisterFile/RegisterBuffers must happen before concurrent
// use; Run and Sync are thread-safe.
#ifndef KVTIER_STORAGE_NVME_IO_ENGINE_H_
#define KVTIER_STORAGE_NVME_IO_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kvtier {

// Alignment of offsets, lengths and buffer addresses for O_DIRECT I/O.
inline constexpr uint64_t kIoAlignment = 4096;

struct IoOp {
  enum class Kind : uint8_t { kRead, kWrite };
  Kind kind = Kind::kRead;
  int file = -1;        // index returned by RegisterFile
  uint64_t offset = 0;  // byte offset in the file
  uint8_t* data = nullptr;
  uint64_t length = 0;
  // Index of a registered buffer that contains [data, data + length), or -1.
  // Engines without registered buffers ignore it. Not used with data2.
  int buffer = -1;
  // Optional second segment: the op then transfers [data, data + length)
  // followed by [data2, data2 + length2), contiguous in the file (readv /
  // writev), as one operation.
  uint8_t* data2 = nullptr;
  uint64_t length2 = 0;

  uint64_t total() const { return length + length2; }
};

struct IoEngineCapabilities {
  bool registered_files = false;
  bool registered_buffers = false;
  bool batched_submission = false;
  uint32_t queue_depth = 1;
};

class IoEngine {
 public:
  virtual ~IoEngine() = default;

  // "io_uring" or "pread".
  virtual absl::string_view name() const = 0;
  virtual IoEngineCapabilities capabilities() const = 0;

  // Registers an open file descriptor (the caller keeps ownership and closes
  // it after the engine is gone). Returns the index to use in IoOp::file.
  virtual absl::StatusOr<int> RegisterFile(int fd) = 0;
  // Forgets a registered file; call before closing its descriptor. Its index
  // is not reused.
  virtual absl::Status UnregisterFile(int file) = 0;
  // Registers memory that later ops may reference by index (IoOp::buffer).
  // Returns the index of the first buffer. A no-op for engines without them.
  virtual absl::StatusOr<int> RegisterBuffers(absl::Span<const absl::Span<uint8_t>> buffers) = 0;

  // Performs every op (up to the queue depth in flight) and waits for all.
  // A short transfer is continued until complete; one that cannot be is an
  // error. Returns one status per op: OK, or the errno as a status
  // (EIO -> DATA_LOSS / UNAVAILABLE, ENOSPC -> RESOURCE_EXHAUSTED, ...).
  virtual std::vector<absl::Status> Run(absl::Span<const IoOp> ops) = 0;

  // Told an op's index and final status (the one Run returns for it).
  using OpDone = absl::FunctionRef<void(size_t op, const absl::Status& status)>;
  // As Run, and calls `done` exactly once per op, on the calling thread,
  // before returning. An engine that overlaps ops calls it as each op
  // finishes, once it has queued the next ones, so that the caller's work
  // on a finished op (verifying a read) overlaps the I/O. `done` must not
  // call into the engine, and it delays other callers' Runs as long as it
  // takes (an engine with one queue serves one Run at a time). By default
  // every op is reported after Run.
  virtual std::vector<absl::Status> RunNotifying(absl::Span<const IoOp> ops, OpDone done);

  // Makes completed writes of a file durable (fdatasync).
  virtual absl::Status Sync(int file) = 0;
};

struct IoEngineOptions {
  // "auto" (io_uring if available, else pread), "io_uring" or "pread".
  std::string kind = "auto";
  uint32_t queue_depth = 32;
};

// The pread/pwrite engine.
std::unique_ptr<IoEngine> CreatePosixIoEngine();

// The engine `options.kind` asks for. With "auto", io_uring when this build
// has it and the kernel allows it, otherwise pread; `note` (if not null)
// says which was chosen and why. INVALID_ARGUMENT for an unknown kind,
// UNAVAILABLE when "io_uring" is demanded but cannot be had.
absl::StatusOr<std::unique_ptr<IoEngine>> CreateIoEngine(const IoEngineOptions& options,
                                                         std::string* note);

// Maps an errno from an I/O call to a status whose message names `what`.
absl::Status IoErrorStatus(int err, absl::string_view what);

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NVME_IO_ENGINE_H_
