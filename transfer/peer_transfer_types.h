// The vocabulary of PeerTransfer (transfer/peer_transfer.h), apart so that
// its pieces (peer registry, source, receiver) can use it without the
// facade: the daemon's role, PeerTransfer's options, a transfer's outcome,
// a peer's counters and the self-description `kvtier status` shows.
#ifndef KVTIER_TRANSFER_PEER_TRANSFER_TYPES_H_
#define KVTIER_TRANSFER_PEER_TRANSFER_TYPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "transfer/transport.h"

namespace kvtier {

// Which directions a daemon serves. A prefill daemon is a source (Push,
// Export); a decode daemon is a receiver (Pull, Stage); both is both.
enum class PeerRole { kPrefill, kDecode, kBoth };
absl::StatusOr<PeerRole> ParsePeerRole(absl::string_view name);
const char* PeerRoleName(PeerRole role);
inline bool IsSource(PeerRole r) { return r != PeerRole::kDecode; }
inline bool IsReceiver(PeerRole r) { return r != PeerRole::kPrefill; }

struct PeerTransferOptions {
  PeerRole role = PeerRole::kBoth;
  // A transfer's deadline when the engine names none.
  absl::Duration timeout = absl::Seconds(10);
  // Longest a receiver keeps staged slots, or a source keeps blocks pinned
  // for a peer, whatever the peer asks. Peers ask for twice their deadline
  // plus 5 s, and a deadline is at most 10 minutes.
  absl::Duration max_hold = absl::Minutes(25);
  // How long a receiver keeps the slots of blocks a push did not complete
  // before reusing them (bytes of a failed sender may still be in flight).
  absl::Duration quarantine = absl::Seconds(10);
  // Stages plus exports held for peers at once.
  uint32_t max_pending = 1024;
  uint32_t max_keys = 65536;
  // The peer addresses transfers may name (as given, "host:port"); empty =
  // any. A daemon that presents credentials to its peers must list them, or
  // an engine could have it send them to an address of its choosing.
  std::vector<std::string> allowed_peers;
};

struct TransferOutcome {
  std::vector<absl::Status> blocks;  // one per key
  std::vector<uint64_t> sizes;       // bytes of each block (0 if unknown)
  uint64_t bytes_moved = 0;
  double transport_seconds = 0;
  std::string lanes;
};

struct PeerStats {
  std::string address;
  std::string daemon_id;
  std::string role;
  std::string lanes;
  bool connected = false;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t blocks_sent = 0;
  uint64_t blocks_received = 0;
  uint64_t transfers = 0;
  uint64_t failed_transfers = 0;
  double transport_seconds = 0;
  uint64_t connects = 0;
  std::string last_error;

  // Bytes moved either way over the seconds the transport spent; 0 before
  // the first transfer.
  double observed_bytes_per_second() const {
    return transport_seconds > 0
               ? static_cast<double>(bytes_sent + bytes_received) / transport_seconds
               : 0;
  }
};

struct PeerTransferInfo {
  bool available = false;
  std::string detail;
  PeerRole role = PeerRole::kBoth;
  TransportCapabilities transport;
};

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_PEER_TRANSFER_TYPES_H_
