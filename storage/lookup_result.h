// What a Lookup answers (BlockCache::Lookup): the matched blocks of a
// namespace, or for a hybrid namespace the restorable cut and what each
// layer group loads for it.
#ifndef KVTIER_STORAGE_LOOKUP_RESULT_H_
#define KVTIER_STORAGE_LOOKUP_RESULT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "storage/block_key.h"

namespace kvtier {

struct MatchedBlock {
  BlockKey key;
  uint64_t size = 0;
  bool on_host = true;  // false: held only on NVMe (a read promotes it)
  // On NVMe with its catalog record committed: survives a daemon crash.
  bool persisted = false;
};

// What one group of a hybrid namespace loads for a Lookup's cut: the blocks
// (or snapshot) of keys [first_key, first_key + blocks.size()).
struct GroupLoad {
  uint32_t group = 0;
  uint32_t first_key = 0;
  std::vector<MatchedBlock> blocks;
};

struct LookupResult {
  // keys[0, matched) hit: the longest cached prefix, or for a hybrid
  // namespace the longest cut every group can restore.
  uint32_t matched = 0;
  std::vector<MatchedBlock> blocks;  // one per matched key; empty for a hybrid
  std::vector<GroupLoad> groups;     // a hybrid's, one per group; else empty
  // A hybrid Lookup with a CutChooser: the restorable cut it chose and, when
  // that is neither 0 nor `matched`, per group what to load for it.
  uint32_t chosen_cut = 0;
  std::vector<GroupLoad> chosen_groups;
  std::string lease_id;  // empty when no lease was taken
  absl::Time lease_expiry = absl::InfinitePast();
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_LOOKUP_RESULT_H_
