// CpuCopyEngine: the CopyEngine backend for host memory, used where no GPU
// exists (and in CI). A batch is cut into pieces of at most kPieceBytes and
// the pieces are spread over `threads` memcpy workers, so one large block or
// many small chunks both keep every worker busy; the batch's completion runs
// on the worker that finishes its last piece.
//
// Thread-safety: thread-safe. The destructor waits for queued batches to
// finish (their completions run) before joining the workers.
#ifndef KVTIER_DATAPATH_CPU_COPY_ENGINE_H_
#define KVTIER_DATAPATH_CPU_COPY_ENGINE_H_

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "datapath/copy_engine.h"

namespace kvtier {

class CpuCopyEngine final : public CopyEngine {
 public:
  static constexpr size_t kPieceBytes = size_t{1} << 20;
  static constexpr int kMaxThreads = 64;

  // threads in [1, kMaxThreads]; 0 picks min(4, hardware threads).
  // `why_host_only` goes into Capabilities().detail (e.g. "no GPU (...)").
  static absl::StatusOr<std::unique_ptr<CpuCopyEngine>> Create(int threads = 0,
                                                               std::string why_host_only = "");
  ~CpuCopyEngine() override;

  CopyEngineCapabilities Capabilities() const override;
  absl::Status Submit(CopyBatch batch, CopyDone done) override;
  absl::Status RegisterHost(void*, size_t) override { return absl::OkStatus(); }
  absl::Status UnregisterHost(void*) override { return absl::OkStatus(); }

 private:
  struct BatchState;
  struct Piece {
    std::shared_ptr<BatchState> batch;
    CopyOp op;
  };

  CpuCopyEngine(int threads, std::string detail);
  void Work();

  const int threads_;
  const std::string detail_;
  Mutex mu_;
  std::deque<Piece> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace kvtier

#endif  // KVTIER_DATAPATH_CPU_COPY_ENGINE_H_
