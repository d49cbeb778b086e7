// RunUnary: a unary method of gRPC's callback API whose work runs on a
// CallExecutor. The handler returns at once; `work` runs on a worker, under
// the method's CallLimit, and its status finishes the call. The context,
// request and response stay valid until then (gRPC's contract for a unary
// callback), so `work` may use them freely. RunUnaryInlineFirst: the same,
// for a call that can often finish on gRPC's thread without waiting.
//
// A unary call is finished through its context's library-owned reactor
// (CallbackServerContext::DefaultReactor), which gRPC documents for a Finish
// from inside the handler or from any thread after it. Its reactions are
// empty, so gRPC runs them inline; a reactor of kvtier's own would have its
// OnDone handed to gRPC's executor thread, one more thread wake-up per call
// (perf: one futex wait in grpc_core::Executor per Lookup, none per
// Health/Check, before this).
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

// Queues `work` for `call`, which holds its place in the limit (`ticket`).
template <typename Work>
void SubmitUnary(grpc::ServerUnaryReactor* call, grpc::CallbackServerContext* context,
                 CallExecutor& executor, CallLimit::Ticket ticket, Work work) {
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
    call->Finish(std::move(status));
  });
  if (!queued) call->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
}

// Takes a place in `limit` for the call, then first tries it on gRPC's own
// thread, which must not wait: `attempt`: std::optional<grpc::Status>(),
// the call's status, or nullopt when it could not finish without waiting
// (for a lock another call holds) and did nothing. Then `work` runs on the
// executor (SubmitUnary), in the same place in the limit. Saves the
// hand-over to a pool thread (a wake-up, tens of microseconds on a VM) for
// short calls.
template <typename Attempt, typename Work>
grpc::ServerUnaryReactor* RunUnaryInlineFirst(grpc::CallbackServerContext* context,
                                              CallExecutor& executor, CallLimit& limit,
                                              Attempt attempt, Work work) {
  grpc::ServerUnaryReactor* call = context->DefaultReactor();
  absl::StatusOr<CallLimit::Ticket> ticket = limit.Enter();
  if (!ticket.ok()) {
    call->Finish(ToGrpc(ticket.status()));
    return call;
  }
  std::optional<grpc::Status> done = attempt();
  if (done.has_value()) {
    ticket->Reset();  // as on the executor: the place frees before the reply leaves
    call->Finish(*std::move(done));
    return call;
  }
  SubmitUnary(call, context, executor, *std::move(ticket), std::move(work));
  return call;
}

// `work`: grpc::Status() (moved to the worker).
template <typename Work>
grpc::ServerUnaryReactor* RunUnary(grpc::CallbackServerContext* context, CallExecutor& executor,
                                   CallLimit& limit, Work work) {
  return RunUnaryInlineFirst(
      context, executor, limit, [] { return std::optional<grpc::Status>(); }, std::move(work));
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
