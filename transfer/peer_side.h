// What each side of a PeerTransfer (PeerSource, PeerReceiver) works with:
// the cache, the transport, the peer registry and this daemon's identity.
// Nothing is owned; PeerTransfer owns or borrows them all, and they outlive
// both sides.
//
// Thread-safety: a plain struct, set once at construction.
#ifndef KVTIER_TRANSFER_PEER_SIDE_H_
#define KVTIER_TRANSFER_PEER_SIDE_H_

#include <string>

#include "absl/time/time.h"

namespace kvtier {

class BlockCache;
class PeerRegistry;
class Transport;

struct PeerSide {
  BlockCache* cache = nullptr;
  Transport* transport = nullptr;
  PeerRegistry* peers = nullptr;
  std::string daemon_id;
  absl::Duration max_hold;  // the longest a stage or export is held
};

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_PEER_SIDE_H_
