// CreateTransport for builds with UCX.
#include "transfer/transport_factory.h"
#include "transfer/ucx/ucx_transport.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<Transport>> CreateTransport() {
  absl::StatusOr<std::unique_ptr<UcxTransport>> t = UcxTransport::Create();
  if (!t.ok()) return t.status();
  return std::unique_ptr<Transport>(std::move(*t));
}

const char* TransportBackendName() { return "ucx"; }

}  // namespace kvtier
