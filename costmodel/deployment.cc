#include "costmodel/deployment.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kvtier::costmodel {

absl::Status Deployment::Validate() const {
  RETURN_IF_ERROR(model.Validate());
  if (tp == 0) return absl::InvalidArgumentError("TP size must be >= 1");
  if (!model.mla.has_value() && model.AttentionLayers() > 0) {
    const uint32_t h = model.num_kv_heads;
    if (!(h % tp == 0 || tp % h == 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TP size ", tp, " neither divides nor is a multiple of the ", h, " KV heads of ",
          model.name, ": engines cannot shard the KV cache that way"));
    }
  }
  if (!(kv_bytes_per_element > 0)) {
    return absl::InvalidArgumentError("KV bytes per element must be > 0");
  }
  if (block_tokens == 0) return absl::InvalidArgumentError("tokens per block must be >= 1");
  if (!(mfu > 0 && mfu <= 1)) return absl::InvalidArgumentError("MFU must be in (0, 1]");
  if (!(gpu.bf16_flops > 0)) return absl::InvalidArgumentError("GPU FLOP/s must be > 0");
  if (!(gpu.memory_bytes > 0)) return absl::InvalidArgumentError("GPU memory must be > 0");
  if (!(gpu.hbm_bytes_per_s > 0)) {
    return absl::InvalidArgumentError("GPU HBM bandwidth must be > 0");
  }
  if (!(gpu.host_link_bytes_per_s > 0)) {
    return absl::InvalidArgumentError("GPU host link bandwidth must be > 0");
  }
  return absl::OkStatus();
}

double Deployment::GroupFlops() const { return tp * PeakFlops(gpu, fp8_compute) * mfu; }

}  // namespace kvtier::costmodel
