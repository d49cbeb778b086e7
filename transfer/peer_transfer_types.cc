#include "transfer/peer_transfer_types.h"

#include "absl/strings/str_cat.h"

namespace kvtier {

absl::StatusOr<PeerRole> ParsePeerRole(absl::string_view name) {
  if (name == "prefill") return PeerRole::kPrefill;
  if (name == "decode") return PeerRole::kDecode;
  if (name == "both") return PeerRole::kBoth;
  return absl::InvalidArgumentError(
      absl::StrCat("peer role '", name, "' is not one of prefill, decode, both"));
}

const char* PeerRoleName(PeerRole role) {
  switch (role) {
    case PeerRole::kPrefill:
      return "prefill";
    case PeerRole::kDecode:
      return "decode";
    case PeerRole::kBoth:
      return "both";
  }
  return "both";
}

}  // namespace kvtier
