// Test-only: FakeDeviceEngine, a CopyEngine that accepts "device" memory
// (which in tests is host memory posing as a GPU's), counts its batches, and
// fails every batch while `fail` is set. Lets the device data path run and
// fail on machines without a GPU.
#ifndef KVTIER_TESTING_TEST_COPY_ENGINE_H_
#define KVTIER_TESTING_TEST_COPY_ENGINE_H_

#include <atomic>
#include <cstring>

#include "datapath/copy_engine.h"

namespace kvtier {

class FakeDeviceEngine final : public CopyEngine {
 public:
  CopyEngineCapabilities Capabilities() const override {
    return {"fake-device", true, 1, 0, "host memory posing as a GPU", 0};
  }
  absl::Status Submit(CopyBatch batch, CopyDone done) override {
    if (absl::Status s = ValidateCopyBatch(batch); !s.ok()) return s;
    ++batches;
    if (fail) {
      done(absl::InternalError("injected copy failure"));
      return absl::OkStatus();
    }
    for (const CopyOp& op : batch.ops) std::memcpy(op.dst, op.src, op.bytes);
    done(absl::OkStatus());
    return absl::OkStatus();
  }
  absl::Status RegisterHost(void*, size_t) override { return absl::OkStatus(); }
  absl::Status UnregisterHost(void*) override { return absl::OkStatus(); }

  std::atomic<int> batches{0};
  std::atomic<bool> fail{false};
};

}  // namespace kvtier

#endif  // KVTIER_TESTING_TEST_COPY_ENGINE_H_
