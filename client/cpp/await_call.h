// AwaitCall: a unary call through a stub's callback API, waited for on the
// calling thread. `start` gets the completion callback and starts the call,
// e.g. [&](auto done) { stub->async()->Lookup(&ctx, &req, &resp, done); };
// AwaitCall returns once gRPC has called it, with the call's status.
//
// For calls made often and waited for at once: on this project's 2-core VMs
// a 128-key Lookup took about 35 us less this way than through the blocking
// stub, whose calling thread polls a completion queue of its own
// (bench/lookup_rpc prints both). Never from one of gRPC's callback threads:
// the wait may hold the thread that would complete the call.
//
// std::mutex, not absl's, whose uninstrumented build ThreadSanitizer cannot
// see (the callback itself runs under gRPC's header code, which
// tests/tsan.supp exempts).
#ifndef KVTIER_CLIENT_CPP_AWAIT_CALL_H_
#define KVTIER_CLIENT_CPP_AWAIT_CALL_H_

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <mutex>
#include <utility>

namespace kvtier {

template <typename Start>
grpc::Status AwaitCall(Start&& start) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  start([&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return status;
}

}  // namespace kvtier

#endif  // KVTIER_CLIENT_CPP_AWAIT_CALL_H_
