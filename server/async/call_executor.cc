#include "server/async/call_executor.h"

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<CallExecutor>> CallExecutor::Create(Options options) {
  if (options.threads < 1 || options.threads > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("call executor '", options.name, "': threads ",
                                                   options.threads, " not in 1..1024"));
  }
  return std::unique_ptr<CallExecutor>(new CallExecutor(std::move(options)));
}

void CallExecutor::Start() {
  if (!workers_.empty()) return;
  workers_.reserve(options_.threads);
  for (uint32_t i = 0; i < options_.threads; ++i) workers_.emplace_back([this] { Run(); });
}

CallExecutor::~CallExecutor() { Stop(); }

bool CallExecutor::Submit(absl::AnyInvocable<void() &&> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(work));
  }
  ready_.notify_one();
  return true;
}

void CallExecutor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : workers_) t.join();
}

size_t CallExecutor::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void CallExecutor::Run() {
  while (true) {
    absl::AnyInvocable<void() &&> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(work)();
  }
}

absl::StatusOr<CallLimit::Ticket> CallLimit::Enter() {
  uint32_t n = in_flight_.load(std::memory_order_acquire);
  do {
    if (n >= max_in_flight_) {
      return absl::ResourceExhaustedError(
          absl::StrCat(method_, ": ", max_in_flight_,
                       " calls already in flight (server.max_calls_per_method); retry later"));
    }
  } while (!in_flight_.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel));
  return Ticket(this);
}

CallLimits::CallLimits(absl::string_view service, std::initializer_list<absl::string_view> methods,
                       uint32_t max_in_flight) {
  for (absl::string_view m : methods) {
    limits_[m] = std::make_unique<CallLimit>(absl::StrCat(service, ".", m), max_in_flight);
  }
}

CallLimit& CallLimits::Of(absl::string_view method) const {
  auto it = limits_.find(method);
  if (it == limits_.end()) {
    spdlog::critical("no call limit for method {}", std::string(method));
    std::abort();
  }
  return *it->second;
}

}  // namespace kvtier
