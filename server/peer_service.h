// PeerService: the gRPC adapter for kvtier.v1.Peer (daemon to daemon). It
// converts messages to domain types and calls PeerTransfer; it holds no state
// of its own. Also home of the Peer message conversions that the gRPC
// PeerChannel (server/grpc_peer_channel.h) shares.
//
// Asynchronous like KvCacheService (server/async/): its own CallExecutor, so
// a KvCache.Transfer waiting on a peer never queues that peer's calls (the
// same daemon may be both ends) behind itself.
//
// Thread-safety: thread-safe (PeerTransfer is).
#ifndef KVTIER_SERVER_PEER_SERVICE_H_
#define KVTIER_SERVER_PEER_SERVICE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "kvtier/v1/peer.grpc.pb.h"
#include "server/async/call_executor.h"
#include "server/auth.h"
#include "transfer/peer_transfer.h"

namespace kvtier {

class PeerService final : public v1::Peer::CallbackService {
 public:
  // What the service delegates to. Pointers must outlive the service.
  struct Deps {
    // Admits callers: the Peer service hands out the arena's remote key, so
    // only role peer (or admin) may call it.
    const Authenticator* auth = nullptr;
    PeerTransfer* transfer = nullptr;
    // Runs the calls' work (required).
    CallExecutor* executor = nullptr;
    uint32_t max_calls_per_method = 256;
  };

  explicit PeerService(Deps deps);

  using Ctx = grpc::CallbackServerContext;
  grpc::ServerUnaryReactor* Hello(Ctx* context, const v1::HelloRequest* request,
                                  v1::HelloResponse* response) override;
  grpc::ServerUnaryReactor* Stage(Ctx* context, const v1::StageRequest* request,
                                  v1::StageResponse* response) override;
  grpc::ServerUnaryReactor* Commit(Ctx* context, const v1::CommitRequest* request,
                                   v1::CommitResponse* response) override;
  grpc::ServerUnaryReactor* Export(Ctx* context, const v1::ExportRequest* request,
                                   v1::ExportResponse* response) override;
  grpc::ServerUnaryReactor* ReleaseExport(Ctx* context, const v1::ReleaseExportRequest* request,
                                          v1::ReleaseExportResponse* response) override;

 private:
  // The synchronous bodies, run on the executor.
  grpc::Status DoHello(Ctx* context, const v1::HelloRequest* request, v1::HelloResponse* response);
  grpc::Status DoStage(Ctx* context, const v1::StageRequest* request, v1::StageResponse* response);
  grpc::Status DoCommit(Ctx* context, const v1::CommitRequest* request,
                        v1::CommitResponse* response);
  grpc::Status DoExport(Ctx* context, const v1::ExportRequest* request,
                        v1::ExportResponse* response);
  grpc::Status DoReleaseExport(Ctx* context, const v1::ReleaseExportRequest* request,
                               v1::ReleaseExportResponse* response);

  const Deps deps_;
  const CallLimits limits_;
};

// Conversions shared with the gRPC PeerChannel. INVALID_ARGUMENT names the
// offending field.
void PeerBlockToProto(const PeerBlockInfo& block, v1::PeerBlock* out);
absl::StatusOr<PeerBlockInfo> PeerBlockFromProto(const v1::PeerBlock& block, const char* field);
// One BlockCompletion per status; `keys` (may be shorter) names the blocks.
void StatusesToCompletions(const std::vector<absl::Status>& statuses,
                           absl::Span<const BlockKey> keys, absl::Span<const uint64_t> sizes,
                           google::protobuf::RepeatedPtrField<v1::BlockCompletion>* out);
absl::Status CompletionToStatus(const v1::BlockCompletion& completion);

}  // namespace kvtier

#endif  // KVTIER_SERVER_PEER_SERVICE_H_
