// CreateTransport for builds without UCX: peer transfer is unavailable.
#include "absl/status/status.h"
#include "transfer/transport_factory.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<Transport>> CreateTransport() { return CreateTransport({}); }

absl::StatusOr<std::unique_ptr<Transport>> CreateTransport(const TransportOptions&) {
  return absl::UnavailableError(
      "peer transfer unavailable: kvtier was built without UCX (install libucx-dev and "
      "configure with -DKVTIER_WITH_UCX=ON)");
}

const char* TransportBackendName() { return ""; }

}  // namespace kvtier
