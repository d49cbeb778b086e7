// The one conversion between absl::Status (domain code) and grpc::Status
// (the gRPC edge: services, the client library, the peer channel). Codes map
// one to one (both follow google.rpc.Code); the message is kept; error
// details are not carried.
#ifndef KVTIER_BASE_GRPC_STATUS_H_
#define KVTIER_BASE_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace kvtier {

grpc::Status ToGrpc(const absl::Status& status);
absl::Status FromGrpc(const grpc::Status& status);

}  // namespace kvtier

#endif  // KVTIER_BASE_GRPC_STATUS_H_
