#include "costmodel/memory_budget.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "costmodel/kv_footprint.h"

namespace kvtier::costmodel {
namespace {
constexpr double kMiB = 1024.0 * 1024;
}  // namespace

MemoryBudget PlanMemoryBudget(const Deployment& d, const BudgetOptions& o) {
  const ModelSpec& m = d.model;
  MemoryBudget b;
  b.usable_bytes = o.util * d.gpu.memory_bytes;
  const ParameterCounts params = m.Parameters();

  const double weights =
      o.weights_bytes_per_gpu.value_or(params.total * m.weight_bytes_per_param / d.tp);
  b.items.push_back(
      {"weights", weights, true,
       o.weights_bytes_per_gpu.has_value()
           ? "given by --weights-bytes-per-gpu"
           : absl::StrFormat("%.4g parameters x %.3g bytes / TP %d; engines measure it after "
                             "loading",
                             params.total, m.weight_bytes_per_param, d.tp)});

  // The largest live tensors of a prefill step of max_batched_tokens: the
  // gated MLP's gate+up output and activation (3 x intermediate per token)
  // plus a few hidden-size buffers (residual, norm, attention output).
  double inter = m.intermediate_size;
  if (m.moe.has_value()) {
    inter = std::max<double>(
        inter, static_cast<double>(m.moe->experts_per_token) * m.moe->expert_intermediate_size);
  }
  const double act_bytes = 2;  // bf16 activations
  const double activation = o.activation_bytes.value_or(o.max_batched_tokens * act_bytes *
                                                        (3 * inter / d.tp + 4.0 * m.hidden_size));
  b.items.push_back(
      {"activation_peak", activation, true,
       o.activation_bytes.has_value()
           ? "given by --activation-bytes"
           : absl::StrFormat("%.0f batched tokens x 2 bytes x (3 x %.0f / TP + 4 x %d); vLLM "
                             "measures the peak in its profile run",
                             o.max_batched_tokens, inter, m.hidden_size)});

  const double graphs = o.cudagraph_bytes.value_or(512 * kMiB);
  b.items.push_back(
      {"cuda_graphs", graphs, true,
       o.cudagraph_bytes.has_value()
           ? "given by --cudagraph-bytes"
           : "estimate 512 MiB for the graph pools of the captured batch sizes; recent vLLM "
             "profiles graph capture before sizing the KV cache, older versions captured after "
             "it (an OOM source)"});

  b.items.push_back({"cuda_context", 600 * kMiB, true,
                     "estimate ~600 MiB: CUDA context and loaded kernels (CUDA 12 lazy loading); "
                     "counted as non-torch memory at the profile run"});
  const double nccl = d.tp > 1 ? 256 * kMiB + 32 * kMiB * d.tp : 0;
  b.items.push_back(
      {"nccl_buffers", nccl, false,
       d.tp > 1 ? "estimate: NCCL_BUFFSIZE 4 MiB per channel and peer over its channels, plus "
                  "the engine's custom all-reduce buffers; allocated lazily at the first "
                  "collective"
                : "none at TP 1"});
  b.items.push_back({"cublas_workspace", 64 * kMiB, false,
                     "estimate: cuBLAS workspace 32 MiB per stream on Hopper (cuBLAS docs), "
                     "two streams; allocated at the first GEMM on a stream"});
  const double sampler = o.max_sequences * m.vocab_size * 4.0 * 2;
  b.items.push_back(
      {"sampler_logits", sampler, true,
       absl::StrFormat("%.0f sequences x vocab %d x fp32 logits and probabilities; vLLM runs "
                       "the sampler in its profile run",
                       o.max_sequences, m.vocab_size)});
  const double fragmentation = 0.02 * d.gpu.memory_bytes;
  b.items.push_back({"allocator_fragmentation", fragmentation, false,
                     "reserve 2% of GPU memory for the caching allocator's fragmentation"});
  if (o.other_bytes > 0) {
    b.items.push_back({"other", o.other_bytes, false, "given by --other-bytes"});
  }

  double reserved = 0;
  for (const BudgetItem& i : b.items) reserved += i.bytes;
  const double left = b.usable_bytes - reserved;
  b.kv_budget_bytes_per_gpu = std::max(0.0, left);
  b.shortfall_bytes = std::max(0.0, -left);
  const KvFootprint f = ComputeKvFootprint(d);
  b.max_blocks_per_gpu = f.bytes_per_block_per_gpu > 0
                             ? std::floor(b.kv_budget_bytes_per_gpu / f.bytes_per_block_per_gpu)
                             : 0;
  b.max_tokens_per_gpu = b.max_blocks_per_gpu * d.block_tokens;
  b.longest_request_tokens = LongestRequestTokens(d, b.kv_budget_bytes_per_gpu);

  b.oom_risks = {
      "the count is a ceiling: the last block of every sequence is partly full (up to "
      "block_tokens - 1 tokens wasted per live sequence)",
      "activation peaks grow with the batch: a step larger than the profile run's "
      "max_batched_tokens needs more than activation_peak",
      "items with measured_by_engine=false (NCCL buffers, cuBLAS workspaces, fragmentation) "
      "appear after the profile run, as do CUDA graph pools in engines that capture after "
      "sizing the KV cache; if nothing left room for them the first long batch or collective "
      "OOMs although the sum looked fine",
  };
  if (b.shortfall_bytes > 0) {
    b.oom_risks.insert(b.oom_risks.begin(),
                       absl::StrFormat("the reservations exceed util x memory by %.3g GiB: "
                                       "no KV cache fits; raise TP or lower max_batched_tokens",
                                       b.shortfall_bytes / (kMiB * 1024)));
  }
  return b;
}

}  // namespace kvtier::costmodel
