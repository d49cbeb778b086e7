#include "storage/eviction/value_policy.h"

#include <algorithm>
#include <cmath>

#include "base/checksum.h"
#include "storage/prefix_index.h"

namespace kvtier {
namespace {

// Stable across runs (unlike absl::Hash), so replays are reproducible.
uint64_t Fingerprint(const BlockRecord& record) {
  const absl::string_view key = record.key.bytes();
  const uint64_t k = Checksum64({reinterpret_cast<const uint8_t*>(key.data()), key.size()});
  return k ^ (record.ns.high() * 0x9e3779b97f4a7c15ULL) ^ record.ns.low();
}

}  // namespace

ValuePolicy::ValuePolicy() {
  factors_[0] = 0;
  for (int p = 1; p <= kMaxRetention; ++p) {
    factors_[p] = std::exp2((p - static_cast<int>(kDefaultRetention)) / 13.0);
  }
}

void ValuePolicy::OnInsert(BlockRecord* record) {
  if (record->uses < 2 && history_.MaybeContains(Fingerprint(*record))) {
    record->uses = 2;  // its Put is its second use
    ++history_hits_;
  }
}

double ValuePolicy::Priority(const BlockRecord& record) const {
  // Relative to the default (the geometric mean of the priced namespaces),
  // so priorities stay near 1 whatever the seconds-per-byte scale, and the
  // inflation built before any namespace was priced stays comparable.
  double value = record.value > 0 ? record.value : 1.0;
  if (default_value_ > 0) value = record.value > 0 ? record.value / default_value_ : 1.0;
  const double reuse = record.uses >= 2 ? kReuseWeight : 1.0;
  return record.clock_at_use + value * reuse * RetentionFactor(record.retention);
}

void ValuePolicy::OnReclaim(const BlockRecord& record, double priority, bool dropped,
                            size_t indexed) {
  inflation_ = std::max(inflation_, priority);
  if (dropped) history_.Add(Fingerprint(record), kHistoryPerBlock * indexed);
}

}  // namespace kvtier
