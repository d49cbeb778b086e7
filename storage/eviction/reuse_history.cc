#include "storage/eviction/reuse_history.h"

#include <algorithm>
#include <utility>

namespace kvtier {
namespace {

constexpr size_t kBitsPerEntry = 10;
constexpr int kProbes = 7;

// A second, independent-enough hash of the fingerprint (splitmix64's
// finalizer) for double hashing: probe i is h1 + i * h2.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

void ReuseHistory::Generation::Reset(size_t cap) {
  capacity = cap;
  entries = 0;
  bits.assign((cap * kBitsPerEntry + 63) / 64, 0);
}

void ReuseHistory::Generation::Set(uint64_t fingerprint) {
  const uint64_t n = bits.size() * 64;
  const uint64_t h2 = Mix(fingerprint) | 1;
  for (int i = 0; i < kProbes; ++i) {
    const uint64_t bit = (fingerprint + static_cast<uint64_t>(i) * h2) % n;
    bits[bit / 64] |= uint64_t{1} << (bit % 64);
  }
  ++entries;
}

bool ReuseHistory::Generation::Test(uint64_t fingerprint) const {
  if (bits.empty()) return false;
  const uint64_t n = bits.size() * 64;
  const uint64_t h2 = Mix(fingerprint) | 1;
  for (int i = 0; i < kProbes; ++i) {
    const uint64_t bit = (fingerprint + static_cast<uint64_t>(i) * h2) % n;
    if ((bits[bit / 64] & (uint64_t{1} << (bit % 64))) == 0) return false;
  }
  return true;
}

void ReuseHistory::Add(uint64_t fingerprint, size_t generation_entries) {
  if (current_.entries >= current_.capacity) {
    old_ = std::move(current_);
    current_ = Generation();
    current_.Reset(std::max(min_entries_, generation_entries));
  }
  current_.Set(fingerprint);
}

bool ReuseHistory::MaybeContains(uint64_t fingerprint) const {
  return current_.Test(fingerprint) || old_.Test(fingerprint);
}

}  // namespace kvtier
