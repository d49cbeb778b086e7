#include "storage/nvme/uring/uring_io_engine.h"

#include <liburing.h>
#include <sys/uio.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "base/status_macros.h"

namespace kvtier {
namespace {

class UringIoEngine final : public IoEngine {
 public:
  explicit UringIoEngine(uint32_t queue_depth) : queue_depth_(queue_depth) {}
  ~UringIoEngine() override {
    if (initialized_) io_uring_queue_exit(&ring_);
  }

  absl::Status Init() {
    const int err = io_uring_queue_init(queue_depth_, &ring_, 0);
    if (err < 0) {
      return absl::UnavailableError(
          absl::StrCat("io_uring_queue_init(", queue_depth_, "): ", std::strerror(-err)));
    }
    initialized_ = true;
    return absl::OkStatus();
  }

  absl::string_view name() const override { return "io_uring"; }
  IoEngineCapabilities capabilities() const override {
    MutexLock lock(&mu_);
    return {true, !iovecs_.empty(), true, queue_depth_};
  }

  absl::StatusOr<int> RegisterFile(int fd) override {
    MutexLock lock(&mu_);
    std::vector<int> next = fds_;
    next.push_back(fd);
    if (!fds_.empty()) io_uring_unregister_files(&ring_);
    const int err =
        io_uring_register_files(&ring_, next.data(), static_cast<unsigned>(next.size()));
    if (err < 0) {
      if (!fds_.empty()) {
        io_uring_register_files(&ring_, fds_.data(), static_cast<unsigned>(fds_.size()));
      }
      return IoErrorStatus(-err, "io_uring_register_files");
    }
    fds_ = std::move(next);
    return static_cast<int>(fds_.size() - 1);
  }

  absl::Status UnregisterFile(int file) override {
    MutexLock lock(&mu_);
    if (file < 0 || file >= static_cast<int>(fds_.size()) || fds_[file] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("unknown file index ", file));
    }
    // Indices stay stable: the slot becomes a sparse (-1) entry.
    int empty = -1;
    const int err = io_uring_register_files_update(&ring_, static_cast<unsigned>(file), &empty, 1);
    if (err < 0) return IoErrorStatus(-err, "io_uring_register_files_update");
    fds_[file] = -1;
    return absl::OkStatus();
  }

  absl::StatusOr<int> RegisterBuffers(absl::Span<const absl::Span<uint8_t>> buffers) override {
    MutexLock lock(&mu_);
    std::vector<iovec> next = iovecs_;
    for (const absl::Span<uint8_t>& b : buffers) next.push_back(iovec{b.data(), b.size()});
    if (!iovecs_.empty()) io_uring_unregister_buffers(&ring_);
    const int err =
        io_uring_register_buffers(&ring_, next.data(), static_cast<unsigned>(next.size()));
    if (err < 0) {
      if (!iovecs_.empty()) {
        io_uring_register_buffers(&ring_, iovecs_.data(), static_cast<unsigned>(iovecs_.size()));
      }
      return IoErrorStatus(-err, "io_uring_register_buffers");
    }
    const int first = static_cast<int>(iovecs_.size());
    iovecs_ = std::move(next);
    return first;
  }

  std::vector<absl::Status> Run(absl::Span<const IoOp> ops) override {
    return RunNotifying(ops, [](size_t, const absl::Status&) {});
  }

  std::vector<absl::Status> RunNotifying(absl::Span<const IoOp> ops, OpDone on_done) override {
    std::vector<absl::Status> status(ops.size());
    // Each op is reported once: as it finishes, or in the sweep before any
    // return (ops that never went to the ring, or that a failed ring left).
    std::vector<bool> reported(ops.size(), false);
    auto report = [&](size_t i) {
      if (reported[i]) return;
      reported[i] = true;
      on_done(i, status[i]);
    };
    auto report_rest = [&] {
      for (size_t i = 0; i < ops.size(); ++i) report(i);
    };
    MutexLock lock(&mu_);
    struct Work {
      size_t op;
      uint64_t done;
    };
    std::deque<Work> pending;
    for (size_t i = 0; i < ops.size(); ++i) {
      const IoOp& op = ops[i];
      if (op.file < 0 || op.file >= static_cast<int>(fds_.size()) || fds_[op.file] < 0) {
        status[i] = absl::InvalidArgumentError(absl::StrCat("unknown file index ", op.file));
      } else if (op.total() > 0) {
        pending.push_back({i, 0});
      }
    }
    std::vector<uint64_t> done(ops.size(), 0);
    // iovecs of vectored ops must live until their completion.
    std::vector<std::array<iovec, 2>> iov(ops.size());
    unsigned in_flight = 0;
    // Queues pending ops up to the depth; true if it queued any.
    auto fill = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      bool queued = false;
      while (!pending.empty() && in_flight < queue_depth_) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        if (sqe == nullptr) break;
        const Work w = pending.front();
        pending.pop_front();
        Prepare(sqe, ops[w.op], w.done, &iov[w.op]);
        io_uring_sqe_set_data64(sqe, w.op);
        ++in_flight;
        queued = true;
      }
      return queued;
    };
    std::vector<size_t> finished;
    while (!pending.empty() || in_flight > 0) {
      fill();
      const int submitted = io_uring_submit_and_wait(&ring_, 1);
      if (submitted < 0 && submitted != -EINTR && submitted != -EAGAIN) {
        // The ring itself failed: fail what has not completed.
        for (size_t i = 0; i < ops.size(); ++i) {
          if (status[i].ok() && done[i] < ops[i].total()) {
            status[i] = IoErrorStatus(-submitted, "io_uring_submit_and_wait");
          }
        }
        Drain(&in_flight);
        report_rest();
        return status;
      }
      io_uring_cqe* cqe = nullptr;
      finished.clear();
      while (in_flight > 0 && io_uring_peek_cqe(&ring_, &cqe) == 0 && cqe != nullptr) {
        const size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
        const int res = cqe->res;
        io_uring_cqe_seen(&ring_, cqe);
        --in_flight;
        const IoOp& op = ops[i];
        if (res == -EAGAIN || res == -EINTR) {
          pending.push_back({i, done[i]});
        } else if (res < 0) {
          status[i] = IoErrorStatus(
              -res, op.kind == IoOp::Kind::kRead ? "io_uring read" : "io_uring write");
          finished.push_back(i);
        } else if (res == 0) {
          status[i] =
              absl::OutOfRangeError(absl::StrCat("end of file at offset ", op.offset + done[i]));
          finished.push_back(i);
        } else {
          done[i] += static_cast<uint64_t>(res);
          if (done[i] < op.total()) {
            pending.push_back({i, done[i]});  // short transfer
          } else {
            finished.push_back(i);
          }
        }
      }
      if (finished.empty()) continue;
      // Keep the device busy while the caller works on what finished: the
      // next ops go to the kernel first (a failure here shows at the next
      // submit_and_wait, which submits them again).
      if (fill()) io_uring_submit(&ring_);
      for (size_t i : finished) report(i);
    }
    report_rest();
    return status;
  }

  absl::Status Sync(int file) override {
    MutexLock lock(&mu_);
    if (file < 0 || file >= static_cast<int>(fds_.size()) || fds_[file] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("unknown file index ", file));
    }
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return absl::UnavailableError("io_uring submission queue full");
    io_uring_prep_fsync(sqe, file, IORING_FSYNC_DATASYNC);
    sqe->flags |= IOSQE_FIXED_FILE;
    int err = io_uring_submit_and_wait(&ring_, 1);
    if (err < 0) return IoErrorStatus(-err, "io_uring_submit_and_wait");
    io_uring_cqe* cqe = nullptr;
    err = io_uring_wait_cqe(&ring_, &cqe);
    if (err < 0) return IoErrorStatus(-err, "io_uring_wait_cqe");
    const int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    if (res < 0) return IoErrorStatus(-res, "fdatasync (io_uring)");
    return absl::OkStatus();
  }

 private:
  void Prepare(io_uring_sqe* sqe, const IoOp& op, uint64_t done, std::array<iovec, 2>* iov)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (op.length2 > 0) {
      unsigned n = 0;
      if (done < op.length) (*iov)[n++] = {op.data + done, op.length - done};
      const uint64_t skip = done > op.length ? done - op.length : 0;
      (*iov)[n++] = {op.data2 + skip, op.length2 - skip};
      if (op.kind == IoOp::Kind::kRead) {
        io_uring_prep_readv(sqe, op.file, iov->data(), n, op.offset + done);
      } else {
        io_uring_prep_writev(sqe, op.file, iov->data(), n, op.offset + done);
      }
      sqe->flags |= IOSQE_FIXED_FILE;
      return;
    }
    uint8_t* data = op.data + done;
    const unsigned length = static_cast<unsigned>(op.length - done);
    const uint64_t offset = op.offset + done;
    const bool fixed = op.buffer >= 0 && op.buffer < static_cast<int>(iovecs_.size());
    if (op.kind == IoOp::Kind::kRead) {
      if (fixed) {
        io_uring_prep_read_fixed(sqe, op.file, data, length, offset, op.buffer);
      } else {
        io_uring_prep_read(sqe, op.file, data, length, offset);
      }
    } else {
      if (fixed) {
        io_uring_prep_write_fixed(sqe, op.file, data, length, offset, op.buffer);
      } else {
        io_uring_prep_write(sqe, op.file, data, length, offset);
      }
    }
    sqe->flags |= IOSQE_FIXED_FILE;
  }

  void Drain(unsigned* in_flight) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (*in_flight > 0) {
      io_uring_cqe* cqe = nullptr;
      if (io_uring_wait_cqe(&ring_, &cqe) != 0) break;
      io_uring_cqe_seen(&ring_, cqe);
      --*in_flight;
    }
  }

  const uint32_t queue_depth_;
  mutable Mutex mu_;
  io_uring ring_ ABSL_GUARDED_BY(mu_){};
  bool initialized_ = false;
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
  std::vector<iovec> iovecs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<IoEngine>> CreateUringIoEngine(uint32_t queue_depth) {
  auto engine = std::make_unique<UringIoEngine>(queue_depth);
  RETURN_IF_ERROR(engine->Init());
  return std::unique_ptr<IoEngine>(std::move(engine));
}

}  // namespace kvtier
