#include "storage/tier_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace kvtier {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kChunk = size_t{1} << 20;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t, FreeDeleter>;

AlignedBuffer Allocate(size_t bytes) {
  return AlignedBuffer(static_cast<uint8_t*>(std::aligned_alloc(kPage, bytes)));
}

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

TransferEstimate ProbeMemoryCopy(size_t bytes) {
  bytes = (bytes + kPage - 1) / kPage * kPage;
  AlignedBuffer src = Allocate(bytes), dst = Allocate(bytes);
  std::memset(src.get(), 0x5a, bytes);
  std::memset(dst.get(), 0, bytes);  // fault the pages in before timing
  absl::Duration best = absl::InfiniteDuration();
  for (int i = 0; i < 3; ++i) {
    const absl::Time start = absl::Now();
    std::memcpy(dst.get(), src.get(), bytes);
    best = std::min(best, absl::Now() - start);
  }
  absl::Duration small = absl::InfiniteDuration();
  for (int i = 0; i < 16; ++i) {
    const absl::Time start = absl::Now();
    std::memcpy(dst.get() + i * kPage % bytes, src.get(), kPage);
    small = std::min(small, absl::Now() - start);
  }
  TransferEstimate e;
  e.bytes_per_s = static_cast<double>(bytes) / std::max(1e-9, absl::ToDoubleSeconds(best));
  e.latency_s = absl::ToDoubleSeconds(small);
  e.source = "probe";
  return e;
}

absl::StatusOr<TransferEstimate> ProbeDirectRead(const std::string& dir, size_t bytes) {
  bytes = std::max(kChunk, bytes / kChunk * kChunk);
  const std::string path = dir + "/kvtier-probe.tmp";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  if (fd < 0) return Errno("open " + path + " with O_DIRECT");
  struct Closer {
    int fd;
    std::string path;
    ~Closer() {
      ::close(fd);
      ::unlink(path.c_str());
    }
  } closer{fd, path};
  AlignedBuffer buf = Allocate(kChunk);
  for (size_t i = 0; i < kChunk; ++i) buf.get()[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t off = 0; off < bytes; off += kChunk) {
    if (::pwrite(fd, buf.get(), kChunk, static_cast<off_t>(off)) != static_cast<ssize_t>(kChunk)) {
      return Errno("write " + path);
    }
  }
  if (::fdatasync(fd) != 0) return Errno("fdatasync " + path);
  const absl::Time start = absl::Now();
  for (size_t off = 0; off < bytes; off += kChunk) {
    if (::pread(fd, buf.get(), kChunk, static_cast<off_t>(off)) != static_cast<ssize_t>(kChunk)) {
      return Errno("read " + path);
    }
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  absl::Duration small = absl::InfiniteDuration();
  for (int i = 0; i < 8; ++i) {
    const absl::Time s = absl::Now();
    if (::pread(fd, buf.get(), kPage, static_cast<off_t>((i * 7 % (bytes / kPage)) * kPage)) !=
        static_cast<ssize_t>(kPage)) {
      return Errno("read " + path);
    }
    small = std::min(small, absl::Now() - s);
  }
  TransferEstimate e;
  e.bytes_per_s = static_cast<double>(bytes) / std::max(1e-9, seconds);
  e.latency_s = absl::ToDoubleSeconds(small);
  e.source = "probe";
  return e;
}

}  // namespace kvtier
