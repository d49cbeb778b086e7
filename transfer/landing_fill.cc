#include "transfer/landing_fill.h"

#include <cstring>

#include "absl/random/random.h"

namespace kvtier {

void FillLandingSlots(absl::Span<uint8_t* const> slots, absl::Span<const PeerBlockInfo> blocks) {
  // A PCG stream (absl::InsecureBitGen) seeded from the OS's entropy per
  // call: unpredictable to a caller that never sees the slots (one that can
  // read them over the transport could read any fill), and several times
  // faster than absl::BitGen, which matters on the receiver's path before
  // every push.
  absl::InsecureBitGen gen;
  auto next = [&gen] { return gen(); };
  for (size_t i = 0; i < slots.size() && i < blocks.size(); ++i) {
    uint8_t* p = slots[i];
    if (p == nullptr) continue;
    uint64_t left = blocks[i].size;
    while (left > 0) {
      const uint64_t word = next();
      const size_t n = left < sizeof word ? static_cast<size_t>(left) : sizeof word;
      std::memcpy(p, &word, n);
      p += n;
      left -= n;
    }
  }
}

}  // namespace kvtier
