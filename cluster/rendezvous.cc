#include "cluster/rendezvous.h"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace kvtier {

RendezvousRing::RendezvousRing(std::vector<std::string> member_ids) {
  std::erase_if(member_ids, [](const std::string& id) { return id.empty(); });
  std::sort(member_ids.begin(), member_ids.end());
  member_ids.erase(std::unique(member_ids.begin(), member_ids.end()), member_ids.end());
  members_ = std::move(member_ids);
  seeds_.reserve(members_.size());
  for (const std::string& id : members_) seeds_.push_back(XXH3_64bits(id.data(), id.size()));
}

std::optional<size_t> RendezvousRing::OwnerOf(const NamespaceId& ns, const BlockKey& key) const {
  if (members_.empty()) return std::nullopt;
  // The scored bytes: the namespace's two halves, then the key.
  std::array<char, 16 + BlockKey::kMaxBytes> bytes{};
  for (int i = 0; i < 8; ++i) {  // little-endian on every machine
    bytes[i] = static_cast<char>(ns.high() >> (8 * i));
    bytes[8 + i] = static_cast<char>(ns.low() >> (8 * i));
  }
  std::memcpy(bytes.data() + 16, key.bytes().data(), key.size());
  const size_t n = 16 + key.size();
  size_t best = 0;
  uint64_t best_score = XXH3_64bits_withSeed(bytes.data(), n, seeds_[0]);
  for (size_t i = 1; i < members_.size(); ++i) {
    const uint64_t score = XXH3_64bits_withSeed(bytes.data(), n, seeds_[i]);
    if (score > best_score) {  // equal scores keep the smaller id (sorted)
      best = i;
      best_score = score;
    }
  }
  return best;
}

absl::string_view RendezvousRing::OwnerIdOf(const NamespaceId& ns, const BlockKey& key) const {
  const std::optional<size_t> owner = OwnerOf(ns, key);
  return owner.has_value() ? absl::string_view(members_[*owner]) : absl::string_view();
}

std::vector<double> RendezvousRing::SampleShares(int samples) const {
  std::vector<double> shares(members_.size(), 0.0);
  if (members_.empty() || samples <= 0) return shares;
  const NamespaceId ns = NamespaceId::FromParts(0, 0);
  for (int i = 0; i < samples; ++i) {
    std::array<char, 8> bytes{};
    for (int b = 0; b < 8; ++b) bytes[b] = static_cast<char>(static_cast<uint64_t>(i) >> (8 * b));
    const absl::StatusOr<BlockKey> key =
        BlockKey::Create(absl::string_view(bytes.data(), bytes.size()));
    if (key.ok()) shares[*OwnerOf(ns, *key)] += 1.0;
  }
  for (double& share : shares) share /= samples;
  return shares;
}

}  // namespace kvtier
