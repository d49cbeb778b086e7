// IoEngineWrapper: an IoEngine that forwards every call to another (not
// owned; it must outlive the wrapper), the base for decorators that change
// only some calls (the fault injector in testing/), in the manner of
// RocksDB's FileSystemWrapper and leveldb's EnvWrapper.
//
// Thread-safety: as thread-safe as its target.
#ifndef KVTIER_STORAGE_NVME_IO_ENGINE_WRAPPER_H_
#define KVTIER_STORAGE_NVME_IO_ENGINE_WRAPPER_H_

#include <vector>

#include "storage/nvme/io_engine.h"

namespace kvtier {

class IoEngineWrapper : public IoEngine {
 public:
  explicit IoEngineWrapper(IoEngine* target) : target_(target) {}

  IoEngine* target() const { return target_; }

  absl::string_view name() const override { return target_->name(); }
  IoEngineCapabilities capabilities() const override { return target_->capabilities(); }
  absl::StatusOr<int> RegisterFile(int fd) override { return target_->RegisterFile(fd); }
  absl::Status UnregisterFile(int file) override { return target_->UnregisterFile(file); }
  absl::StatusOr<int> RegisterBuffers(absl::Span<const absl::Span<uint8_t>> buffers) override {
    return target_->RegisterBuffers(buffers);
  }
  std::vector<absl::Status> Run(absl::Span<const IoOp> ops) override { return target_->Run(ops); }
  // RunNotifying is not forwarded: IoEngine's reports after this->Run, so a
  // wrapper that overrides Run alone (a fault injector) sees every op.
  absl::Status Sync(int file) override { return target_->Sync(file); }

 private:
  IoEngine* const target_;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NVME_IO_ENGINE_WRAPPER_H_
