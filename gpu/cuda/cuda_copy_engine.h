// CudaCopyEngine: the CopyEngine backend for one GPU.
//  - One stream per direction (host->device, device->host, device->device),
//    so loads and saves do not queue behind each other.
//  - Host<->device batches go to the driver as one cudaMemcpyBatchAsync
//    (CUDA 12.8+); device<->device batches are one launch of the copy kernel
//    (gpu/cuda/copy_kernel.h), its descriptors in a memory pool that keeps
//    its pages. Host<->host batches go to a CPU engine.
//  - Each batch ends with an event; a completion thread per stream waits for
//    the events in order and runs `done` with the stream's status, so a
//    failed copy is reported, not hung on, and `done` never runs on a CUDA
//    callback thread (it may call CUDA).
//  - RegisterHost pins memory (cudaHostRegister) so copies run at link speed;
//    the daemon pins its host arena once at start.
//
// Thread-safety: thread-safe. The destructor waits for accepted batches.
#ifndef KVTIER_GPU_CUDA_CUDA_COPY_ENGINE_H_
#define KVTIER_GPU_CUDA_CUDA_COPY_ENGINE_H_

#include <cuda_runtime_api.h>

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "datapath/copy_engine.h"
#include "datapath/cpu_copy_engine.h"
#include "gpu/cuda/copy_kernel.h"

namespace kvtier {

class CudaCopyEngine final : public CopyEngine {
 public:
  // FAILED_PRECONDITION when `device` is not a usable GPU.
  static absl::StatusOr<std::unique_ptr<CudaCopyEngine>> Create(int device, int cpu_threads = 0);
  ~CudaCopyEngine() override;

  CopyEngineCapabilities Capabilities() const override;
  absl::Status Submit(CopyBatch batch, CopyDone done) override;
  absl::Status RegisterHost(void* p, size_t bytes) override;
  absl::Status UnregisterHost(void* p) override;

 private:
  // Page-locked host memory for a device batch's kernel descriptors: their
  // upload is then a DMA the stream orders, not a staged copy the caller
  // waits for. Reused across batches (Lane::spare_descs).
  struct FreePinned {
    void operator()(DeviceCopyDesc* p) const { cudaFreeHost(p); }
  };
  struct PinnedDescs {
    std::unique_ptr<DeviceCopyDesc[], FreePinned> data;
    size_t capacity = 0;
  };
  struct Pending {
    cudaEvent_t event = nullptr;
    CopyDone done;
    absl::Status submit_error;  // an op failed to enqueue after others were
    PinnedDescs descs;
    DeviceCopyDesc* device_descs = nullptr;
  };
  // One stream and the thread that completes its batches in order.
  struct Lane {
    cudaStream_t stream = nullptr;
    Mutex mu;
    std::deque<std::unique_ptr<Pending>> queue ABSL_GUARDED_BY(mu);
    bool stopping ABSL_GUARDED_BY(mu) = false;
    // Descriptor buffers of completed batches, at most kSpareDescBuffers.
    std::vector<PinnedDescs> spare_descs ABSL_GUARDED_BY(mu);
    std::thread completer;
  };

  CudaCopyEngine(int device, std::string name, std::unique_ptr<CpuCopyEngine> host);
  absl::Status Start();
  void Complete(Lane& lane);
  Lane& LaneFor(const CopyBatch& batch);
  // A pinned buffer for `count` descriptors: one of the lane's spares that is
  // large enough, or a new one.
  static absl::StatusOr<PinnedDescs> TakeDescs(Lane& lane, size_t count);

  static constexpr size_t kSpareDescBuffers = 4;

  const int device_;
  const std::string device_name_;
  // Device memory for the copy kernel's descriptors. A pool of its own that
  // keeps what it has mapped: the default pool gives its memory back at every
  // synchronization, and mapping it again costs more than a small batch's copy.
  cudaMemPool_t desc_pool_ = nullptr;
  std::unique_ptr<CpuCopyEngine> host_;
  Lane lanes_[3];  // h2d, d2h, d2d
};

}  // namespace kvtier

#endif  // KVTIER_GPU_CUDA_CUDA_COPY_ENGINE_H_
