// ValuePolicy: keep what saves the most recompute per byte (the default).
//
// A GreedyDual-Size-Frequency order. A block is filed under
//   priority = inflation at its last use + value * reuse * retention
// and the tiers reclaim the lowest priority first; the inflation (the
// policy's clock) rises to the priority of each block reclaimed, so blocks
// not used again age out and a block worth k times more survives about k
// times as many turnovers.
//   value:     the recompute seconds a hit saves per byte of the block, from
//              its namespace's cost model (BlockCache::SetRetentionValue);
//              taken relative to the geometric mean of the priced
//              namespaces (SetDefaultValue), which is what blocks of a
//              namespace without one count as; all 1 when none is priced.
//   reuse:     1 for a block used once, kReuseWeight once used again (a
//              lookup hit or a read, or a Put of a block the ReuseHistory
//              remembers as evicted). Measured on public traces: a block used
//              twice is twice as likely to be used again, and its next use
//              comes long after an LRU cache would have dropped it.
//   retention: the engine's retention priority p (0..100, default 35) as a
//              factor 2^((p - 35) / 13): 0.16 at 1, 1 at 35, 32 at 100; p = 0
//              gives 0, reclaimed first.
// The settings are fixed here, chosen on the shared Mooncake trace only
// (bench/trace_replay); they are not tuned per trace.
//
// Thread-safety: see EvictionPolicy.
#ifndef KVTIER_STORAGE_EVICTION_VALUE_POLICY_H_
#define KVTIER_STORAGE_EVICTION_VALUE_POLICY_H_

#include <array>
#include <cstdint>

#include "storage/eviction/eviction_policy.h"
#include "storage/eviction/reuse_history.h"

namespace kvtier {

class ValuePolicy final : public EvictionPolicy {
 public:
  // The weight of a block used more than once against one used once.
  static constexpr double kReuseWeight = 4.0;
  // The history remembers between this many and twice as many evictions per
  // indexed block.
  static constexpr size_t kHistoryPerBlock = 4;

  ValuePolicy();

  absl::string_view name() const override { return "value"; }
  void OnInsert(BlockRecord* record) override;
  double Priority(const BlockRecord& record) const override;
  double clock() const override { return inflation_; }
  void OnReclaim(const BlockRecord& record, double priority, bool dropped, size_t indexed) override;
  void SetDefaultValue(double seconds_per_byte) override { default_value_ = seconds_per_byte; }
  size_t memory_bytes() const override { return history_.memory_bytes(); }

  // Puts of evicted blocks the history recognized.
  uint64_t history_hits() const { return history_hits_; }
  // The retention factor of priority p (0..100; larger values count as 100).
  double RetentionFactor(uint8_t p) const {
    return factors_[p > kMaxRetention ? kMaxRetention : p];
  }

 private:
  std::array<double, kMaxRetention + 1> factors_{};
  double inflation_ = 0;
  double default_value_ = 0;
  ReuseHistory history_;
  uint64_t history_hits_ = 0;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_EVICTION_VALUE_POLICY_H_
