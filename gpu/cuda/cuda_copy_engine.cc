#include "gpu/cuda/cuda_copy_engine.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "gpu/cuda/cuda_status.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<CudaCopyEngine>> CudaCopyEngine::Create(int device,
                                                                       int cpu_threads) {
  int count = 0;
  if (absl::Status s = CudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount"); !s.ok()) {
    return absl::FailedPreconditionError(s.message());
  }
  if (device < 0 || device >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPU ", device, " does not exist (", count, " found)"));
  }
  cudaDeviceProp prop{};
  if (absl::Status s =
          CudaStatus(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
      !s.ok()) {
    return s;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CpuCopyEngine> host, CpuCopyEngine::Create(cpu_threads));
  std::unique_ptr<CudaCopyEngine> engine(
      new CudaCopyEngine(device, absl::StrCat(device, ": ", prop.name), std::move(host)));
  RETURN_IF_ERROR(engine->Start());
  return engine;
}

CudaCopyEngine::CudaCopyEngine(int device, std::string name, std::unique_ptr<CpuCopyEngine> host)
    : device_(device), device_name_(std::move(name)), host_(std::move(host)) {}

absl::Status CudaCopyEngine::Start() {
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device_;
  RETURN_IF_ERROR(CudaStatus(cudaMemPoolCreate(&desc_pool_, &props), "cudaMemPoolCreate"));
  uint64_t keep_all = UINT64_MAX;
  RETURN_IF_ERROR(
      CudaStatus(cudaMemPoolSetAttribute(desc_pool_, cudaMemPoolAttrReleaseThreshold, &keep_all),
                 "cudaMemPoolSetAttribute"));
  for (Lane& lane : lanes_) {
    if (absl::Status s = CudaStatus(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking),
                                    "cudaStreamCreateWithFlags");
        !s.ok()) {
      return s;
    }
    lane.completer = std::thread([this, &lane] { Complete(lane); });
  }
  return absl::OkStatus();
}

CudaCopyEngine::~CudaCopyEngine() {
  for (Lane& lane : lanes_) {
    {
      MutexLock lock(&lane.mu);
      lane.stopping = true;
    }
    if (lane.completer.joinable()) lane.completer.join();
    if (lane.stream != nullptr) cudaStreamDestroy(lane.stream);
  }
  if (desc_pool_ != nullptr) cudaMemPoolDestroy(desc_pool_);
}

CopyEngineCapabilities CudaCopyEngine::Capabilities() const {
  CopyEngineCapabilities c;
  c.name = "cuda";
  c.device_memory = true;
  c.device = device_;
  cudaGetDeviceCount(&c.device_count);
  c.worker_threads = host_->Capabilities().worker_threads;
  c.detail = absl::StrCat("GPU ", device_name_,
                          ": batched host<->device copies, one kernel per device batch");
  return c;
}

CudaCopyEngine::Lane& CudaCopyEngine::LaneFor(const CopyBatch& batch) {
  if (batch.src_kind == MemoryKind::kHost) return lanes_[0];
  if (batch.dst_kind == MemoryKind::kHost) return lanes_[1];
  return lanes_[2];
}

absl::Status CudaCopyEngine::Submit(CopyBatch batch, CopyDone done) {
  if (batch.src_kind == MemoryKind::kHost && batch.dst_kind == MemoryKind::kHost) {
    return host_->Submit(std::move(batch), std::move(done));
  }
  RETURN_IF_ERROR(ValidateCopyBatch(batch));
  if (batch.device != device_) {
    return absl::InvalidArgumentError(
        absl::StrCat("this copy engine serves GPU ", device_, ", not ", batch.device));
  }
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
  Lane& lane = LaneFor(batch);
  auto p = std::make_unique<Pending>();
  p->done = std::move(done);
  if (absl::Status s = CudaStatus(
          cudaEventCreateWithFlags(&p->event, cudaEventDisableTiming | cudaEventBlockingSync),
          "cudaEventCreateWithFlags");
      !s.ok()) {
    return s;
  }
  std::vector<CopyOp> ops;
  for (const CopyOp& op : batch.ops) {
    if (op.bytes > 0) ops.push_back(op);
  }
  const bool device_to_device =
      batch.src_kind == MemoryKind::kDevice && batch.dst_kind == MemoryKind::kDevice;
  cudaError_t err = cudaSuccess;
  if (ops.empty()) {
    // Nothing to copy; the event still orders the completion.
  } else if (device_to_device) {
    absl::StatusOr<PinnedDescs> descs = TakeDescs(lane, ops.size());
    if (!descs.ok()) {
      cudaEventDestroy(p->event);
      return descs.status();
    }
    p->descs = *std::move(descs);
    for (size_t i = 0; i < ops.size(); ++i) {
      p->descs.data[i] = {reinterpret_cast<uint64_t>(ops[i].dst),
                          reinterpret_cast<uint64_t>(ops[i].src), ops[i].bytes};
    }
    const size_t bytes = ops.size() * sizeof(DeviceCopyDesc);
    err = cudaMallocFromPoolAsync(reinterpret_cast<void**>(&p->device_descs), bytes, desc_pool_,
                                  lane.stream);
    if (err == cudaSuccess) {
      err = cudaMemcpyAsync(p->device_descs, p->descs.data.get(), bytes, cudaMemcpyHostToDevice,
                            lane.stream);
    }
    if (err == cudaSuccess) err = LaunchCopyKernel(p->device_descs, ops.size(), lane.stream);
    if (p->device_descs != nullptr) cudaFreeAsync(p->device_descs, lane.stream);
  } else {
    std::vector<void*> dsts;
    std::vector<const void*> srcs;
    std::vector<size_t> sizes;
    for (const CopyOp& op : ops) {
      dsts.push_back(op.dst);
      srcs.push_back(op.src);
      sizes.push_back(op.bytes);
    }
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t attr_index = 0;
    err = cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), ops.size(), &attr,
                               &attr_index, 1, lane.stream);
    if (err == cudaErrorNotSupported || err == cudaErrorInvalidValue) {
      // Older drivers, or memory the batch API declines: copy op by op.
      cudaGetLastError();
      err = cudaSuccess;
      for (size_t i = 0; i < ops.size() && err == cudaSuccess; ++i) {
        err = cudaMemcpyAsync(ops[i].dst, ops[i].src, ops[i].bytes, cudaMemcpyDefault, lane.stream);
        if (err != cudaSuccess && i > 0) {
          // Earlier copies are queued: the batch completes with the error.
          p->submit_error = CudaStatus(err, absl::StrCat("cudaMemcpyAsync of ops[", i, "]"));
          err = cudaSuccess;
          break;
        }
      }
    }
  }
  if (err != cudaSuccess) {
    cudaStreamSynchronize(lane.stream);  // nothing of this batch may still be running
    cudaEventDestroy(p->event);
    return CudaStatus(err, "enqueueing the copy batch");
  }
  if (absl::Status s = CudaStatus(cudaEventRecord(p->event, lane.stream), "cudaEventRecord");
      !s.ok()) {
    cudaStreamSynchronize(lane.stream);
    p->submit_error = s;
  }
  MutexLock lock(&lane.mu);
  lane.queue.push_back(std::move(p));
  return absl::OkStatus();
}

void CudaCopyEngine::Complete(Lane& lane) {
  cudaSetDevice(device_);
  auto ready = [&lane]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu) {
    return lane.stopping || !lane.queue.empty();
  };
  for (;;) {
    std::unique_ptr<Pending> p;
    {
      MutexLock lock(&lane.mu);
      lane.mu.Await(Condition(&ready));
      if (lane.queue.empty()) return;  // drained and stopping
      p = std::move(lane.queue.front());
      lane.queue.pop_front();
    }
    absl::Status status = p->submit_error;
    const absl::Status waited = CudaStatus(cudaEventSynchronize(p->event), "copy batch");
    if (status.ok()) status = waited;
    cudaEventDestroy(p->event);
    if (p->descs.data != nullptr) {
      // The batch's event has fired: its descriptor upload is done.
      MutexLock lock(&lane.mu);
      if (lane.spare_descs.size() < kSpareDescBuffers) {
        lane.spare_descs.push_back(std::move(p->descs));
      }
    }
    p->done(std::move(status));
  }
}

absl::StatusOr<CudaCopyEngine::PinnedDescs> CudaCopyEngine::TakeDescs(Lane& lane, size_t count) {
  {
    MutexLock lock(&lane.mu);
    for (auto it = lane.spare_descs.begin(); it != lane.spare_descs.end(); ++it) {
      if (it->capacity >= count) {
        PinnedDescs spare = std::move(*it);
        lane.spare_descs.erase(it);
        return spare;
      }
    }
  }
  size_t capacity = 1024;
  while (capacity < count) capacity *= 2;
  void* memory = nullptr;
  RETURN_IF_ERROR(
      CudaStatus(cudaMallocHost(&memory, capacity * sizeof(DeviceCopyDesc)), "cudaMallocHost"));
  PinnedDescs made;
  made.data.reset(static_cast<DeviceCopyDesc*>(memory));
  made.capacity = capacity;
  return made;
}

absl::Status CudaCopyEngine::RegisterHost(void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) {
    return absl::InvalidArgumentError("RegisterHost needs a pointer and a size");
  }
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
  return CudaStatus(cudaHostRegister(p, bytes, cudaHostRegisterPortable), "cudaHostRegister");
}

absl::Status CudaCopyEngine::UnregisterHost(void* p) {
  return CudaStatus(cudaHostUnregister(p), "cudaHostUnregister");
}

}  // namespace kvtier
