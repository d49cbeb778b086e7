// RunUnary: a unary method of gRPC's callback API whose work runs on a
// CallExecutor. The handler returns at once; `work` runs on a worker, under
// the method's CallLimit, and its status finishes the call. The context,
// request and response stay valid until then (gRPC's contract for a unary
// callback), so `work` may use them freely.
#ifndef KVTIER_SERVER_ASYNC_UNARY_CALL_H_
#define KVTIER_SERVER_ASYNC_UNARY_CALL_H_

#include <utility>

#include "base/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "server/async/call_executor.h"

namespace kvtier {

// `work`: grpc::Status() (moved to the worker).
template <typename Work>
grpc::ServerUnaryReactor* RunUnary(grpc::CallbackServerContext* context, CallExecutor& executor,
                                   CallLimit& limit, Work work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<CallLimit::Ticket> ticket = limit.Enter();
  if (!ticket.ok()) {
    reactor->Finish(ToGrpc(ticket.status()));
    return reactor;
  }
  const bool queued =
      executor.Submit([reactor, work = std::move(work), ticket = *std::move(ticket)]() mutable {
        grpc::Status status = work();
        // The place frees before the reply leaves: a caller that sends its
        // next call on the reply never finds its own last one counted.
        ticket.Reset();
        reactor->Finish(std::move(status));
      });
  if (!queued) reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
  return reactor;
}

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
