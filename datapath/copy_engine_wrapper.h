// CopyEngineWrapper: a CopyEngine that forwards every call to another (not
// owned; it must outlive the wrapper), the base for decorators that change
// only some calls (the fault injector in testing/), in the manner of
// RocksDB's FileSystemWrapper and leveldb's EnvWrapper.
//
// Thread-safety: as thread-safe as its target.
#ifndef KVTIER_DATAPATH_COPY_ENGINE_WRAPPER_H_
#define KVTIER_DATAPATH_COPY_ENGINE_WRAPPER_H_

#include <cstddef>
#include <utility>

#include "datapath/copy_engine.h"

namespace kvtier {

class CopyEngineWrapper : public CopyEngine {
 public:
  explicit CopyEngineWrapper(CopyEngine* target) : target_(target) {}

  CopyEngine* target() const { return target_; }

  CopyEngineCapabilities Capabilities() const override { return target_->Capabilities(); }
  absl::Status Submit(CopyBatch batch, CopyDone done) override {
    return target_->Submit(std::move(batch), std::move(done));
  }
  absl::Status RegisterHost(void* p, size_t bytes) override {
    return target_->RegisterHost(p, bytes);
  }
  absl::Status UnregisterHost(void* p) override { return target_->UnregisterHost(p); }

 private:
  CopyEngine* const target_;
};

}  // namespace kvtier

#endif  // KVTIER_DATAPATH_COPY_ENGINE_WRAPPER_H_
