#include "base/hashed_copy.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/types/span.h"
#include "base/checksum.h"

namespace kvtier {
namespace {

// Sizes around the streaming threshold, the 64-byte store step and the
// hashed piece, at every alignment mix of source and destination.
constexpr size_t kSizes[] = {0,    1,    15,    63,    64,    255,   256,   257,   4095,
                             4096, 4097, 16383, 16384, 16385, 65536, 65600, 100007};
constexpr size_t kOffsets[] = {0, 1, 8, 15};
constexpr size_t kGuard = 64;  // canary bytes either side of the destination

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  uint32_t x = 0x9e3779b9u;
  for (uint8_t& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

enum class Kind { kStream, kCopyAndHash };

void CheckCopy(Kind kind) {
  const std::vector<uint8_t> source = Pattern(100007 + 64);
  for (size_t n : kSizes) {
    for (size_t src_off : kOffsets) {
      for (size_t dst_off : kOffsets) {
        const uint8_t* src = source.data() + src_off;
        std::vector<uint8_t> dst(n + dst_off + 2 * kGuard, 0xA5);
        uint8_t* to = dst.data() + kGuard + dst_off;
        Checksum64Stream hash;
        switch (kind) {
          case Kind::kStream:
            StreamCopy(to, src, n);
            break;
          case Kind::kCopyAndHash:
            CopyAndHash(to, src, n, hash);
            break;
        }
        SCOPED_TRACE(testing::Message() << "n " << n << " src+" << src_off << " dst+" << dst_off);
        ASSERT_EQ(std::memcmp(to, src, n), 0);
        for (size_t i = 0; i < kGuard + dst_off; ++i) ASSERT_EQ(dst[i], 0xA5) << "before, " << i;
        for (size_t i = kGuard + dst_off + n; i < dst.size(); ++i) {
          ASSERT_EQ(dst[i], 0xA5) << "after, " << i;
        }
        if (kind != Kind::kStream) {
          ASSERT_EQ(hash.Digest(), Checksum64({src, n}));
        }
      }
    }
  }
}

TEST(HashedCopyTest, StreamCopyCopiesExactlyTheRange) { CheckCopy(Kind::kStream); }
TEST(HashedCopyTest, CopyAndHashCopiesAndHashesExactlyTheRange) { CheckCopy(Kind::kCopyAndHash); }

// A block copied in several calls hashes as the block does in one.
TEST(HashedCopyTest, PiecesOfABlockHashAsTheWholeBlock) {
  const std::vector<uint8_t> block = Pattern(3 * 65536 + 123);
  std::vector<uint8_t> a(block.size());
  Checksum64Stream ha;
  for (size_t at = 0; at < block.size(); at += 65536) {
    const size_t n = std::min<size_t>(65536, block.size() - at);
    CopyAndHash(a.data() + at, block.data() + at, n, ha);
  }
  EXPECT_EQ(a, block);
  EXPECT_EQ(ha.Digest(), Checksum64(block));
}

// The source is another process's shared memory that it keeps rewriting, as
// a client may while its Save runs (another process, so no thread of this
// one races the copy). Each copy's checksum is that of the bytes it stored,
// however the writes tore them: a copy that hashed the source and then
// copied it again would store bytes its checksum does not describe.
TEST(HashedCopyTest, TheChecksumDescribesTheBytesStoredWhileTheSourceChanges) {
  constexpr size_t kBytes = 256 << 10;
  struct Shared {
    std::atomic<bool> started{false};
    std::atomic<bool> stop{false};
    alignas(64) uint8_t bytes[kBytes];
  };
  void* map =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  absl::Cleanup unmap = [&] { munmap(map, sizeof(Shared)); };
  auto* shared = new (map) Shared;
  std::memset(shared->bytes, 0, kBytes);
  const pid_t parent = getpid();
  const pid_t writer = fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    // Never outlives the test, even if it died before the prctl.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    shared->started.store(true, std::memory_order_relaxed);
    // Each generation writes its own value over every byte, 8 bytes at a
    // time, so a copy that overlaps it sees two generations.
    for (uint64_t gen = 1; !shared->stop.load(std::memory_order_relaxed); ++gen) {
      for (size_t at = 0; at < kBytes; at += 8) {
        std::memcpy(shared->bytes + at, &gen, 8);
      }
    }
    _exit(0);
  }
  // Stops the writer however the test ends (an ASSERT returns early).
  absl::Cleanup stop_writer = [&] {
    shared->stop.store(true, std::memory_order_relaxed);
    int status = 0;
    EXPECT_EQ(waitpid(writer, &status, 0), writer);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
  };
  // Until 200 copies were torn, or 20 s on a machine too busy to run the
  // writer beside this thread.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!shared->started.load(std::memory_order_relaxed) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  std::vector<uint8_t> dst(kBytes + 1);
  int torn = 0;
  for (int copies = 0; torn < 200 && std::chrono::steady_clock::now() < deadline; ++copies) {
    Checksum64Stream hash;
    // Offset by one byte: the head, the streamed body and the tail all race.
    CopyAndHash(dst.data() + 1, shared->bytes, kBytes, hash);
    ASSERT_EQ(hash.Digest(), Checksum64({dst.data() + 1, kBytes})) << "copy " << copies;
    uint64_t first, last;
    std::memcpy(&first, dst.data() + 1, 8);
    std::memcpy(&last, dst.data() + 1 + kBytes - 8, 8);
    if (first != last) ++torn;
  }
  // The race was run: some copies saw the source change under them.
  EXPECT_GT(torn, 0);
}

}  // namespace
}  // namespace kvtier
