// RunUnary: a unary method of gRPC's callback API whose work runs on a
// CallExecutor. The handler returns at once; `work` runs on a worker, under
// the method's CallLimit, and its status finishes the call. The context,
// request and response stay valid until then (gRPC's contract for a unary
// callback), so `work` may use them freely. RunUnaryInlineFirst: the same,
// for a call that can often finish on gRPC's thread without waiting.
//
// RefusedCall: a streaming call answered at once with an error (gRPC needs
// a reactor to finish any call).
#ifndef KVTIER_SERVER_ASYNC_UNARY_CALL_H_
#define KVTIER_SERVER_ASYNC_UNARY_CALL_H_

#include <optional>
#include <utility>

#include "base/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "server/async/call_executor.h"
#include "server/async/tsan_handoff.h"

namespace kvtier {

// A unary call's reactor: answers once, deletes itself when gRPC is done.
class UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  void Answer(grpc::Status status) {
    HandOff(this);
    Finish(std::move(status));
  }

 private:
  void OnDone() override {
    TakeOver(this);
    delete this;
  }
};

// Queues `work` for `call`, which holds its place in the limit (`ticket`).
template <typename Work>
void SubmitUnary(UnaryCall* call, grpc::CallbackServerContext* context, CallExecutor& executor,
                 CallLimit::Ticket ticket, Work work) {
  const bool queued = executor.Submit([call, context, work = std::move(work),
                                       ticket = std::move(ticket)]() mutable {
    // A caller that gave up (deadline, cancel) while the call was queued
    // changes nothing.
    grpc::Status status =
        context->IsCancelled()
            ? grpc::Status(grpc::StatusCode::CANCELLED, "the caller gave up before the call ran")
            : work();
    // The place frees before the reply leaves: a caller that sends its
    // next call on the reply never finds its own last one counted.
    ticket.Reset();
    call->Answer(std::move(status));
  });
  if (!queued) call->Answer(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
}

// `work`: grpc::Status() (moved to the worker).
template <typename Work>
grpc::ServerUnaryReactor* RunUnary(grpc::CallbackServerContext* context, CallExecutor& executor,
                                   CallLimit& limit, Work work) {
  auto* call = new UnaryCall();
  absl::StatusOr<CallLimit::Ticket> ticket = limit.Enter();
  if (!ticket.ok()) {
    call->Answer(ToGrpc(ticket.status()));
    return call;
  }
  SubmitUnary(call, context, executor, *std::move(ticket), std::move(work));
  return call;
}

// As RunUnary, but first tries the call on gRPC's own thread, which must
// not wait: `attempt`: std::optional<grpc::Status>(), the call's status, or
// nullopt when it could not finish without waiting (for a lock another call
// holds) and did nothing. Then `work` runs on the executor as RunUnary's
// does, in the same place in the limit. Saves the hand-over to a pool
// thread (a wake-up, tens of microseconds on a VM) for short calls.
template <typename Attempt, typename Work>
grpc::ServerUnaryReactor* RunUnaryInlineFirst(grpc::CallbackServerContext* context,
                                              CallExecutor& executor, CallLimit& limit,
                                              Attempt attempt, Work work) {
  auto* call = new UnaryCall();
  absl::StatusOr<CallLimit::Ticket> ticket = limit.Enter();
  if (!ticket.ok()) {
    call->Answer(ToGrpc(ticket.status()));
    return call;
  }
  std::optional<grpc::Status> done = attempt();
  if (done.has_value()) {
    ticket->Reset();  // as on the executor: the place frees before the reply leaves
    call->Answer(*std::move(done));
    return call;
  }
  SubmitUnary(call, context, executor, *std::move(ticket), std::move(work));
  return call;
}

// `Reactor`: grpc::ServerReadReactor<T> or grpc::ServerWriteReactor<T>.
template <typename Reactor>
class RefusedCall final : public Reactor {
 public:
  explicit RefusedCall(grpc::Status status) {
    HandOff(this);
    this->Finish(std::move(status));
  }

 private:
  void OnDone() override {
    TakeOver(this);
    delete this;
  }
};

}  // namespace kvtier

// Defines Class::Method of a callback service as RunUnary of the class's
// synchronous body Do<Method>(context, request, response) on `executor`
// (a CallExecutor&) under `limits` (a CallLimits). For .cc files, after the
// class is declared.
#define KVTIER_UNARY_ON_EXECUTOR(Class, Method, executor, limits)                            \
  grpc::ServerUnaryReactor* Class::Method(grpc::CallbackServerContext* context,              \
                                          const v1::Method##Request* request,                \
                                          v1::Method##Response* response) {                  \
    return ::kvtier::RunUnary(context, executor, (limits).Of(#Method),                       \
                              [=, this] { return Do##Method(context, request, response); }); \
  }

#endif  // KVTIER_SERVER_ASYNC_UNARY_CALL_H_
