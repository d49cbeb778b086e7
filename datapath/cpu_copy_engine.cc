#include "datapath/cpu_copy_engine.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kvtier {

struct CpuCopyEngine::BatchState {
  std::atomic<size_t> pieces_left{0};
  CopyDone done;
};

absl::StatusOr<std::unique_ptr<CpuCopyEngine>> CpuCopyEngine::Create(int threads,
                                                                     std::string why_host_only) {
  if (threads == 0) {
    threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  }
  if (threads < 1 || threads > kMaxThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy threads must be in [1, ", kMaxThreads, "], not ", threads));
  }
  return std::unique_ptr<CpuCopyEngine>(new CpuCopyEngine(
      threads, why_host_only.empty() ? "host memory only (memcpy workers)"
                                     : absl::StrCat("host memory only: ", why_host_only)));
}

CpuCopyEngine::CpuCopyEngine(int threads, std::string detail)
    : threads_(threads), detail_(std::move(detail)) {
  workers_.reserve(threads);
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
}

CpuCopyEngine::~CpuCopyEngine() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : workers_) t.join();
}

CopyEngineCapabilities CpuCopyEngine::Capabilities() const {
  CopyEngineCapabilities c;
  c.name = "cpu";
  c.device_memory = false;
  c.worker_threads = threads_;
  c.detail = detail_;
  return c;
}

absl::Status CpuCopyEngine::Submit(CopyBatch batch, CopyDone done) {
  if (batch.src_kind != MemoryKind::kHost || batch.dst_kind != MemoryKind::kHost) {
    return absl::FailedPreconditionError(
        "the CPU copy engine moves host memory only; device memory needs the CUDA backend and a "
        "GPU");
  }
  RETURN_IF_ERROR(ValidateCopyBatch(batch));
  auto state = std::make_shared<BatchState>();
  state->done = std::move(done);
  std::vector<Piece> pieces;
  for (const CopyOp& op : batch.ops) {
    for (size_t at = 0; at < op.bytes; at += kPieceBytes) {
      const size_t n = std::min(kPieceBytes, op.bytes - at);
      pieces.push_back(Piece{state, CopyOp{static_cast<uint8_t*>(op.dst) + at,
                                           static_cast<const uint8_t*>(op.src) + at, n}});
    }
  }
  if (pieces.empty()) {
    state->done(absl::OkStatus());
    return absl::OkStatus();
  }
  state->pieces_left.store(pieces.size(), std::memory_order_relaxed);
  MutexLock lock(&mu_);
  for (Piece& p : pieces) queue_.push_back(std::move(p));
  return absl::OkStatus();
}

void CpuCopyEngine::Work() {
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
  for (;;) {
    Piece piece;
    {
      MutexLock lock(&mu_);
      mu_.Await(Condition(&ready));
      // Drain before stopping: every accepted batch completes.
      if (queue_.empty()) return;
      piece = std::move(queue_.front());
      queue_.pop_front();
    }
    std::memcpy(piece.op.dst, piece.op.src, piece.op.bytes);
    if (piece.batch->pieces_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      piece.batch->done(absl::OkStatus());
    }
  }
}

}  // namespace kvtier
