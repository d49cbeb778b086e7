// Test-only: deterministic pseudo-random bytes from a seed string, so a test
// can check any block's bytes against what it must contain.
#ifndef KVTIER_TESTING_TEST_BYTES_H_
#define KVTIER_TESTING_TEST_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kvtier {

inline std::vector<uint8_t> DeterministicBytes(const std::string& seed, size_t n) {
  std::vector<uint8_t> out(n);
  uint64_t x = std::hash<std::string>()(seed) | 1;  // xorshift64
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<uint8_t>(x);
  }
  return out;
}

// DeterministicBytes as a string, as Put and Get carry them.
inline std::string DeterministicString(const std::string& seed, size_t n) {
  const std::vector<uint8_t> b = DeterministicBytes(seed, n);
  return std::string(b.begin(), b.end());
}

}  // namespace kvtier

#endif  // KVTIER_TESTING_TEST_BYTES_H_
