// QueuedWriter: a server-streaming call of gRPC's callback API fed by a
// producer that runs elsewhere (on a CallExecutor). The producer Pushes
// messages from its thread without waiting for the client; the reactor
// writes them in order, one write in flight at a time. Close(status) ends
// the stream once everything pushed is written; the last message and the
// status leave together. (No buffer hint on the writes in between: in gRPC
// 1.51 such a write may not complete until a later one flushes it, and the
// reactor waits for each write before the next.)
//
// Memory: the queue is bounded by what the producer pushes (a Save's or
// Load's completions: at most one per block of the request); producers of
// unbounded streams must pace themselves (see Get's own reactor).
//
// Lifetime: gRPC owns the object. The producer may use it until it calls
// Close, and not after; the object deletes itself when gRPC is done with
// the call (OnDone), which cannot happen before Close.
#ifndef KVTIER_SERVER_ASYNC_QUEUED_WRITER_H_
#define KVTIER_SERVER_ASYNC_QUEUED_WRITER_H_

#include <deque>
#include <memory>
#include <utility>

#include "base/mutex.h"
#include "grpcpp/grpcpp.h"
#include "server/async/call_executor.h"
#include "server/async/tsan_handoff.h"
#include "server/stream_idle_reaper.h"

namespace kvtier {

template <typename Msg>
class QueuedWriter final : public grpc::ServerWriteReactor<Msg> {
 public:
  // `ticket` (the call's place in its method's limit) and `watch` (its idle
  // watch, touched by every Push and every write that completes; may be
  // null) are held until gRPC is done with the call: a client that stops
  // reading stays counted and can be reaped.
  explicit QueuedWriter(CallLimit::Ticket ticket = {},
                        std::unique_ptr<StreamIdleReaper::Watch> watch = nullptr)
      : ticket_(std::move(ticket)), watch_(std::move(watch)) {}

  // Queues `message`. False once the client can no longer receive (a write
  // failed: cancelled, gone, deadline); the producer should stop then.
  bool Push(Msg message) {
    if (watch_ != nullptr) watch_->Touch();
    {
      MutexLock lock(&mu_);
      if (failed_) return false;
      queue_.push_back(std::move(message));
      if (writing_) return true;
      writing_ = true;
    }
    Pump();
    return true;
  }

  // Ends the call with `status` after the queued messages. Call once; the
  // producer must not touch the object afterwards.
  void Close(grpc::Status status) {
    {
      MutexLock lock(&mu_);
      closed_ = true;
      status_ = std::move(status);
      if (writing_) return;  // the write in flight finishes the call
      writing_ = true;
    }
    Pump();
  }

 private:
  void OnWriteDone(bool ok) override {
    TakeOver(this);
    if (ok && watch_ != nullptr) watch_->Touch();
    if (!ok) {
      MutexLock lock(&mu_);
      failed_ = true;
      queue_.clear();
    }
    Pump();
  }
  void OnDone() override {
    TakeOver(this);
    delete this;
  }

  // REQUIRES: this thread owns the writer (writing_ set by it).
  void Pump() {
    enum { kWrite, kWriteAndFinish, kFinish, kIdle } step = kIdle;
    grpc::Status status;
    {
      MutexLock lock(&mu_);
      if (queue_.empty()) {
        writing_ = false;
        if (closed_ && !finished_) {
          finished_ = true;
          step = kFinish;
          status = status_;
        }
      } else {
        current_ = std::move(queue_.front());
        queue_.pop_front();
        if (queue_.empty() && closed_ && status_.ok()) {
          finished_ = true;
          step = kWriteAndFinish;
          status = status_;
        } else {
          step = kWrite;
        }
      }
    }
    // Outside the lock: gRPC may run a reaction inline.
    if (step != kIdle) HandOff(this);
    switch (step) {
      case kWrite:
        this->StartWrite(&current_);
        break;
      case kWriteAndFinish:
        this->StartWriteAndFinish(&current_, grpc::WriteOptions(), status);
        break;
      case kFinish:
        this->Finish(status);
        break;
      case kIdle:
        break;
    }
  }

  CallLimit::Ticket ticket_;
  const std::unique_ptr<StreamIdleReaper::Watch> watch_;
  Mutex mu_;
  std::deque<Msg> queue_ ABSL_GUARDED_BY(mu_);
  // The message being written; touched only by the thread owning the writer.
  Msg current_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_ASYNC_QUEUED_WRITER_H_
