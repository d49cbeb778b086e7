// CallExecutor: the bounded pool of threads that runs a service's domain
// work for gRPC's callback API, and CallLimit, the cap on one method's calls
// in flight. Together they replace the synchronous server's thread per call:
// gRPC's own callback threads only read, write and hand over, never wait on
// a kvtier lock or on I/O; the work runs here, at most `threads` calls at a
// time per service, the rest queued in arrival order; and a method with
// `max_in_flight` calls open refuses the next with RESOURCE_EXHAUSTED
// instead of queueing without bound.
//
// Contract for work submitted: it must not wait for work queued behind it on
// the same executor (it may wait for work already running, which will end).
// Each service has an executor of its own, so a Peer call that a KvCache
// call waits for never queues behind it.
//
// Thread-safety: thread-safe. Lifetime: Stop (or the destructor) runs what
// is queued, then joins; gRPC's Server::Shutdown must end before, since calls
// still in flight Submit their next steps.
#ifndef KVTIER_SERVER_ASYNC_CALL_EXECUTOR_H_
#define KVTIER_SERVER_ASYNC_CALL_EXECUTOR_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvtier {

class CallExecutor {
 public:
  struct Options {
    // Names the threads in errors and logs ("kvcache", "admin", "peer").
    std::string name;
    // Calls whose work runs at once; 1..1024.
    uint32_t threads = 8;
  };
  // Made without threads: Start runs them. Work submitted before waits.
  static absl::StatusOr<std::unique_ptr<CallExecutor>> Create(Options options);
  // Starts the workers. Whatever the caller did before (building the
  // services whose work runs here) happens-before every piece of work, as
  // thread creation orders it, which matters where the work reaches the
  // executor through a library TSan cannot see into (gRPC). Once.
  void Start();
  ~CallExecutor();
  CallExecutor(const CallExecutor&) = delete;
  CallExecutor& operator=(const CallExecutor&) = delete;

  // Queues `work` to run on a worker. False, and `work` destroyed unrun,
  // once Stop has begun.
  bool Submit(absl::AnyInvocable<void() &&> work);
  // Refuses new work, runs what was queued (destroys it unrun if never
  // started), joins the workers. Idempotent.
  void Stop();

  const Options& options() const { return options_; }
  // Work queued and not yet started (for tests and status).
  size_t queued() const;

 private:
  explicit CallExecutor(Options options) : options_(std::move(options)) {}
  void Run();

  const Options options_;
  // A plain std::mutex and condition variable, not base/mutex.h: Submit
  // wakes one idle worker (notify_one), where base's Mutex wakes every
  // waiter on each unlock, a herd of all idle workers per call. (libstdc++'s
  // std::mutex carries no capability annotation, so the two fields below
  // say their guard in words.)
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::deque<absl::AnyInvocable<void() &&>> queue_;  // guarded by mu_
  bool stopping_ = false;                            // guarded by mu_
  std::vector<std::thread> workers_;                 // written by Create and Stop only
};

// The cap on one method's calls in flight. A Ticket holds one place until
// destroyed.
class CallLimit {
 public:
  // `method` names the method in the refusal; max_in_flight >= 1.
  CallLimit(std::string method, uint32_t max_in_flight)
      : method_(std::move(method)), max_in_flight_(max_in_flight) {}

  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept : limit_(std::exchange(other.limit_, nullptr)) {}
    Ticket& operator=(Ticket&& other) noexcept {
      Reset();
      limit_ = std::exchange(other.limit_, nullptr);
      return *this;
    }
    ~Ticket() { Reset(); }
    void Reset() {
      if (limit_ != nullptr) limit_->in_flight_.fetch_sub(1, std::memory_order_acq_rel);
      limit_ = nullptr;
    }

   private:
    friend class CallLimit;
    explicit Ticket(CallLimit* limit) : limit_(limit) {}
    CallLimit* limit_ = nullptr;
  };

  // A place, or RESOURCE_EXHAUSTED naming the method and its limit.
  absl::StatusOr<Ticket> Enter();
  uint32_t in_flight() const { return in_flight_.load(std::memory_order_acquire); }
  uint32_t max_in_flight() const { return max_in_flight_; }

 private:
  const std::string method_;
  const uint32_t max_in_flight_;
  std::atomic<uint32_t> in_flight_{0};
};

// The limits of one service's methods, made at construction (read-only
// after, so no lock).
class CallLimits {
 public:
  // One CallLimit per name in `methods`, named "service.method".
  CallLimits(absl::string_view service, std::initializer_list<absl::string_view> methods,
             uint32_t max_in_flight);
  // The limit of `method`; a name not given to the constructor is a bug of
  // the caller and aborts.
  CallLimit& Of(absl::string_view method) const;

 private:
  absl::flat_hash_map<std::string, std::unique_ptr<CallLimit>> limits_;
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_ASYNC_CALL_EXECUTOR_H_
