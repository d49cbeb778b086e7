#include "server/landing_fill.h"

#include <cstring>

#include "absl/random/random.h"

namespace kvtier {

void FillLandingSlots(absl::Span<uint8_t* const> slots, absl::Span<const PeerBlockInfo> blocks) {
  absl::BitGen gen;  // seeded from the OS's entropy, per call
  for (size_t i = 0; i < slots.size() && i < blocks.size(); ++i) {
    uint8_t* p = slots[i];
    if (p == nullptr) continue;
    uint64_t left = blocks[i].size;
    while (left > 0) {
      const uint64_t word = absl::Uniform<uint64_t>(gen);
      const size_t n = left < sizeof word ? static_cast<size_t>(left) : sizeof word;
      std::memcpy(p, &word, n);
      p += n;
      left -= n;
    }
  }
}

}  // namespace kvtier
