// kSanitized: whether this test binary runs under AddressSanitizer or
// ThreadSanitizer (gcc and clang spell it differently). Their runtimes
// replace glibc's malloc and map shadow memory beside every mapping, so
// tests that count the process's page faults or mappings hold only
// without them.
#ifndef KVTIER_TESTING_SANITIZERS_H_
#define KVTIER_TESTING_SANITIZERS_H_

namespace kvtier::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace kvtier::testing

#endif  // KVTIER_TESTING_SANITIZERS_H_
