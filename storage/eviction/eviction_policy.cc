#include "storage/eviction/eviction_policy.h"

#include "absl/strings/str_cat.h"
#include "storage/eviction/leaf_lru_policy.h"
#include "storage/eviction/value_policy.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<EvictionPolicy>> EvictionPolicyByName(absl::string_view name) {
  if (name == "value") return std::make_unique<ValuePolicy>();
  if (name == "lru") return std::make_unique<LeafLruPolicy>();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown eviction policy \"", name, "\": expected \"value\" or \"lru\""));
}

}  // namespace kvtier
