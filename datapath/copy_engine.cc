#include "datapath/copy_engine.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace kvtier {

absl::Status ValidateCopyBatch(const CopyBatch& batch) {
  if (batch.device < 0) {
    return absl::InvalidArgumentError(absl::StrCat("device ", batch.device, " is negative"));
  }
  for (size_t i = 0; i < batch.ops.size(); ++i) {
    const CopyOp& op = batch.ops[i];
    if (op.bytes == 0) continue;
    if (op.dst == nullptr || op.src == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("ops[", i, "]: null pointer"));
    }
    // Source and destination in the same memory may not overlap (memcpy and
    // cudaMemcpy semantics). Host and device addresses never alias.
    if (batch.src_kind == batch.dst_kind) {
      const auto s = reinterpret_cast<uintptr_t>(op.src);
      const auto d = reinterpret_cast<uintptr_t>(op.dst);
      if (s < d + op.bytes && d < s + op.bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat("ops[", i, "]: source and destination overlap"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kvtier
