// Transport: one-sided byte movement between this daemon's memory and a peer
// daemon's memory (remote put and get), the seam under prefill-to-decode
// transfer. A daemon exposes its host arena once; peers learn the arena's
// address and remote key through the control plane (the gRPC Peer service)
// and then move block bytes with put (local -> remote) and get (remote ->
// local), without protobuf on the data path.
//
// The interface is owned by storage so that the daemon's transfer logic does
// not know which backend moves the bytes. The UCX backend lives in
// transfer/ucx/ (it picks RDMA, TCP or shared memory from UCX_TLS); a binary
// built without UCX gets transfer/CreateTransport's UNAVAILABLE answer.
//
// Thread-safety: every method may be called from any thread. A connection is
// identified by the id Connect returns; Execute calls on one connection may
// run concurrently.
#ifndef KVTIER_TRANSFER_TRANSPORT_H_
#define KVTIER_TRANSFER_TRANSPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace kvtier {

struct TransportCapabilities {
  std::string name;  // "ucx"
  // Transports the backend may use (UCX_TLS), e.g. "tcp" or "all".
  std::string transports;
  // Whether a failed peer is reported as such (otherwise only deadlines
  // catch it).
  bool detects_peer_failure = false;
  // Whether GPU memory can be exposed (a UCX build with CUDA support), and
  // why not when it cannot.
  bool device_memory = false;
  std::string detail;
  // The network devices the backend may use (UCX_NET_DEVICES), e.g. "lo";
  // "all" when unrestricted, "" when the backend uses no network.
  std::string net_devices;
};

// Memory a process exposes to its peers: everything a peer needs to address
// it. `remote_key` is backend-specific (a packed UCX rkey).
struct ExposedMemory {
  uint64_t base = 0;
  uint64_t size = 0;
  std::string remote_key;
};

// kPut copies local bytes into the peer's memory; kGet the reverse.
enum class RmaKind { kPut, kGet };

struct RmaOp {
  uint8_t* local = nullptr;
  uint64_t remote_address = 0;  // inside the peer's ExposedMemory
  uint64_t bytes = 0;
};

// What one connection reports about itself.
struct ConnectionInfo {
  std::string lanes;  // transports and devices in use, e.g. "tcp/lo"
  bool connected = false;
  std::string last_error;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual TransportCapabilities Capabilities() const = 0;

  // The opaque address peers connect to (a UCX worker address).
  virtual std::string LocalAddress() const = 0;

  // Makes `memory` reachable by peers until the transport is destroyed; the
  // memory must outlive the transport. Exposing a second range replaces the
  // first for new connections. INVALID_ARGUMENT for an empty range.
  virtual absl::StatusOr<ExposedMemory> Expose(absl::Span<uint8_t> memory) = 0;

  // Opens a connection to the peer at `peer_address` whose exposed memory is
  // `remote`. INVALID_ARGUMENT for an address or key the backend cannot
  // parse, UNAVAILABLE when the peer cannot be reached.
  virtual absl::StatusOr<uint64_t> Connect(absl::string_view peer_address,
                                           const ExposedMemory& remote) = 0;

  // Closes a connection, failing its in-flight operations. Unknown ids are
  // ignored.
  virtual void Disconnect(uint64_t connection) = 0;

  // Runs `ops` and returns one status per op, in order, once every op has
  // finished. OK for a kPut means the bytes are in the peer's memory (the
  // connection was flushed), for a kGet that they are in local memory.
  // An op whose remote range leaves the peer's exposed memory is refused
  // with INVALID_ARGUMENT and never issued. When `deadline` passes or the
  // peer fails, the connection is closed: unfinished ops end with
  // DEADLINE_EXCEEDED or UNAVAILABLE, and later calls get UNAVAILABLE until
  // a new Connect. No op touches its local buffer after Execute returns.
  virtual std::vector<absl::Status> Execute(uint64_t connection, RmaKind kind,
                                            absl::Span<const RmaOp> ops, absl::Time deadline) = 0;

  virtual ConnectionInfo Describe(uint64_t connection) = 0;
};

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_TRANSPORT_H_
