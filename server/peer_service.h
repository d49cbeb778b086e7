// PeerService: the gRPC adapter for kvtier.v1.Peer (daemon to daemon). It
// converts messages to domain types and calls PeerTransfer; it holds no state
// of its own. Also home of the Peer message conversions that the gRPC
// PeerChannel (server/grpc_peer_channel.h) shares.
//
// Thread-safety: thread-safe (PeerTransfer is).
#ifndef KVTIER_SERVER_PEER_SERVICE_H_
#define KVTIER_SERVER_PEER_SERVICE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "kvtier/v1/peer.grpc.pb.h"
#include "server/auth.h"
#include "transfer/peer_transfer.h"

namespace kvtier {

class PeerService final : public v1::Peer::Service {
 public:
  // What the service delegates to. Pointers must outlive the service.
  struct Deps {
    // Admits callers: the Peer service hands out the arena's remote key, so
    // only role peer (or admin) may call it.
    const Authenticator* auth = nullptr;
    PeerTransfer* transfer = nullptr;
  };

  explicit PeerService(Deps deps) : deps_(deps) {}

  grpc::Status Hello(grpc::ServerContext* context, const v1::HelloRequest* request,
                     v1::HelloResponse* response) override;
  grpc::Status Stage(grpc::ServerContext* context, const v1::StageRequest* request,
                     v1::StageResponse* response) override;
  grpc::Status Commit(grpc::ServerContext* context, const v1::CommitRequest* request,
                      v1::CommitResponse* response) override;
  grpc::Status Export(grpc::ServerContext* context, const v1::ExportRequest* request,
                      v1::ExportResponse* response) override;
  grpc::Status ReleaseExport(grpc::ServerContext* context, const v1::ReleaseExportRequest* request,
                             v1::ReleaseExportResponse* response) override;

 private:
  const Deps deps_;
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
