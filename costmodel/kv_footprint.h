// KV footprint of a deployment: bytes per token (questions 1, 8, 11),
// per-GPU sharding and replication under tensor parallelism, layer groups
// and the sliding-window saving (question 12), block-size waste (question 2)
// and the recurrent state inventory with its restart boundary (question 16).
// Formulas are in docs/planner.md.
//
// Thread-safety: stateless functions.
#ifndef KVTIER_COSTMODEL_KV_FOOTPRINT_H_
#define KVTIER_COSTMODEL_KV_FOOTPRINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/deployment.h"

namespace kvtier::costmodel {

struct GroupFootprint {
  LayerGroup group;
  double bytes_per_token_per_gpu = 0;  // 0 for recurrent and MLP-only groups
};

struct KvFootprint {
  // Unique KV bytes of one token over all ranks and attention layers (K and
  // V, or the MLA latent), counting sliding layers as if the token were in
  // their window.
  double bytes_per_token = 0;
  double bytes_per_token_per_gpu = 0;
  // KV heads each GPU holds (GQA), or 1 latent (MLA).
  double kv_heads_per_gpu = 0;
  // Copies of each KV head (or of the latent) across the TP group.
  double replication = 1;
  // bytes_per_token_per_gpu * tp - bytes_per_token: bytes per token stored
  // more than once cluster-wide.
  double duplicate_bytes_per_token = 0;
  double bytes_per_block_per_gpu = 0;
  std::vector<GroupFootprint> groups;
  // Recurrent (conv + SSM) state of one live request, all ranks / per GPU.
  double recurrent_state_bytes_per_request = 0;
  double recurrent_state_bytes_per_request_per_gpu = 0;
  // When replication > 1: the parallelism that avoids it.
  std::string alternative;
};

// Requires d.Validate().ok().
KvFootprint ComputeKvFootprint(const Deployment& d);

// KV bytes one GPU holds for a request of n tokens: full-attention layers
// hold n tokens, sliding layers min(window, n), plus the recurrent state.
double KvBytesPerGpuAtContext(const Deployment& d, double n);

// Question 12: fraction of KV bytes sliding windows save at context n,
// f * (1 - min(w, n) / n) summed over sliding groups (f = their share of the
// per-token KV bytes).
double SlidingWindowSaving(const Deployment& d, double n);

// Longest request (tokens, a multiple of the block size) whose KV fits in
// `budget_bytes` on one GPU.
double LongestRequestTokens(const Deployment& d, double budget_bytes);

// Question 2: the cost of a block size for sequences of mean length n.
struct BlockSizeReport {
  double max_waste_tokens_per_sequence = 0;    // B - 1
  double max_waste_fraction = 0;               // (B - 1) / n
  double blocks_per_sequence = 0;              // ceil(n / B)
  double bytes_per_block_per_gpu = 0;          // one copy unit
  double prefix_match_granularity_tokens = 0;  // B
};
BlockSizeReport BlockSize(const Deployment& d, double mean_tokens);

// Question 16: recurrent state checkpoints.
struct StatePlan {
  double ssm_state_bytes_per_layer = 0;
  double conv_state_bytes_per_layer = 0;
  uint32_t recurrent_layers = 0;
  double state_bytes_per_request = 0;
  double state_bytes_per_checkpoint = 0;
  // Positions where every layer group can restore: multiples of
  // lcm(block_tokens, checkpoint_interval).
  uint64_t restart_boundary_tokens = 0;
  double checkpoints_at_context = 0;
  double checkpoint_bytes_at_context = 0;
};
StatePlan PlanState(const Deployment& d, uint64_t checkpoint_interval, double context_tokens);

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_KV_FOOTPRINT_H_
