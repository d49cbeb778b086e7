// CreateTransport for builds with UCX.
#include "transfer/transport_factory.h"
#include "transfer/ucx/ucx_transport.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<Transport>> CreateTransport() { return CreateTransport({}); }

absl::StatusOr<std::unique_ptr<Transport>> CreateTransport(const TransportOptions& options) {
  absl::StatusOr<std::unique_ptr<UcxTransport>> t = UcxTransport::Create(options.net_devices);
  if (!t.ok()) return t.status();
  return std::unique_ptr<Transport>(std::move(*t));
}

const char* TransportBackendName() { return "ucx"; }

}  // namespace kvtier
