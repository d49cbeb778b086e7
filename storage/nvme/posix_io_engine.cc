// PosixIoEngine: IoEngine over pread/pwrite, one op at a time. The fallback
// where io_uring is not built in or not permitted.
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "storage/nvme/io_engine.h"

namespace kvtier {

absl::Status IoErrorStatus(int err, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    case EINVAL:
    case EBADF:
    case EFAULT:
      return absl::InvalidArgumentError(message);
    case EAGAIN:
    case EINTR:
    case EBUSY:
      return absl::UnavailableError(message);
    case EIO:
    default:
      return absl::DataLossError(message);
  }
}

namespace {

class PosixIoEngine final : public IoEngine {
 public:
  absl::string_view name() const override { return "pread"; }
  IoEngineCapabilities capabilities() const override { return {}; }

  absl::StatusOr<int> RegisterFile(int fd) override {
    MutexLock lock(&mu_);
    fds_.push_back(fd);
    return static_cast<int>(fds_.size() - 1);
  }

  absl::Status UnregisterFile(int file) override {
    MutexLock lock(&mu_);
    if (file < 0 || file >= static_cast<int>(fds_.size()) || fds_[file] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("unknown file index ", file));
    }
    fds_[file] = -1;
    return absl::OkStatus();
  }

  absl::StatusOr<int> RegisterBuffers(absl::Span<const absl::Span<uint8_t>>) override { return 0; }

  std::vector<absl::Status> Run(absl::Span<const IoOp> ops) override {
    std::vector<absl::Status> out;
    out.reserve(ops.size());
    for (const IoOp& op : ops) out.push_back(RunOne(op));
    return out;
  }

  absl::Status Sync(int file) override {
    const int fd = Fd(file);
    if (fd < 0) return absl::InvalidArgumentError(absl::StrCat("unknown file index ", file));
    if (fdatasync(fd) != 0) return IoErrorStatus(errno, "fdatasync");
    return absl::OkStatus();
  }

 private:
  int Fd(int file) {
    MutexLock lock(&mu_);
    return (file >= 0 && file < static_cast<int>(fds_.size())) ? fds_[file] : -1;
  }

  absl::Status RunOne(const IoOp& op) {
    const int fd = Fd(op.file);
    if (fd < 0) return absl::InvalidArgumentError(absl::StrCat("unknown file index ", op.file));
    uint64_t done = 0;
    while (done < op.total()) {
      iovec iov[2];
      int n_iov = 0;
      if (done < op.length) iov[n_iov++] = {op.data + done, op.length - done};
      if (op.length2 > 0) {
        const uint64_t skip = done > op.length ? done - op.length : 0;
        iov[n_iov++] = {op.data2 + skip, op.length2 - skip};
      }
      const off_t at = static_cast<off_t>(op.offset + done);
      const ssize_t n =
          op.kind == IoOp::Kind::kRead ? preadv(fd, iov, n_iov, at) : pwritev(fd, iov, n_iov, at);
      if (n < 0) {
        if (errno == EINTR) continue;
        return IoErrorStatus(errno, op.kind == IoOp::Kind::kRead ? "pread" : "pwrite");
      }
      if (n == 0) {
        return absl::OutOfRangeError(absl::StrCat("end of file at offset ", op.offset + done));
      }
      done += static_cast<uint64_t>(n);
    }
    return absl::OkStatus();
  }

  Mutex mu_;
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<IoEngine> CreatePosixIoEngine() { return std::make_unique<PosixIoEngine>(); }

}  // namespace kvtier
