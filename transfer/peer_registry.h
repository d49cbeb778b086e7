// PeerRegistry: the peers this daemon has transferred with, as PeerTransfer
// sees them. One entry per peer address ("host:port"), made on first use
// with a PeerChannel from the factory, holding the transport connection to
// the peer (made by Hello + Connect, re-made when the transport reports it
// broken) and the peer's counters (PeerStats). It detects a restarted peer:
// when a peer answers Stage or Export as another daemon instance than the
// connection reaches, CheckSameInstance drops the connection (its addresses
// belong to the old instance's arena), so the next transfer says Hello
// again. At most 4096 peers are known; past that, peers no transfer uses
// and that are not connected are forgotten.
//
// Thread-safety: thread-safe. It has its own mutex (PeerTransfer's peers
// mutex before the split); each peer's connection has its own, so
// connecting to one peer never waits on another.
#ifndef KVTIER_TRANSFER_PEER_REGISTRY_H_
#define KVTIER_TRANSFER_PEER_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "transfer/peer_channel.h"
#include "transfer/peer_transfer_types.h"
#include "transfer/transport.h"

namespace kvtier {

// One known peer. `target` and `channel` may be used freely; the rest
// belongs to PeerRegistry.
struct KnownPeer {
  KnownPeer(std::string t, std::unique_ptr<PeerChannel> c)
      : target(std::move(t)), channel(std::move(c)) {}
  const std::string target;
  const std::unique_ptr<PeerChannel> channel;
  Mutex connect_mu;  // serializes (re)connecting
  std::optional<uint64_t> connection ABSL_GUARDED_BY(connect_mu);
  // Guarded by PeerRegistry's mutex: the connection as Peers() sees it
  // (without waiting on a connect in progress) and the counters.
  std::optional<uint64_t> listed_connection;
  PeerStats stats;
};

// A peer with the connection to use for one transfer.
struct PeerLink {
  std::shared_ptr<KnownPeer> peer;
  uint64_t connection = 0;
  std::string daemon_id;  // the instance the connection reaches
};

class PeerRegistry {
 public:
  static constexpr size_t kMaxPeers = 4096;

  // `transport` (not owned, null when transfer is unavailable: then only
  // Peers() may be called) must outlive every call. `daemon_id` is this
  // daemon's, presented in Hello.
  PeerRegistry(Transport* transport, PeerChannelFactory channels, std::string daemon_id);
  PeerRegistry(const PeerRegistry&) = delete;
  PeerRegistry& operator=(const PeerRegistry&) = delete;

  // The peer's entry with a live connection, (re)connecting as needed.
  // RESOURCE_EXHAUSTED past kMaxPeers; Hello's or Connect's error,
  // annotated, when the peer cannot be reached.
  absl::StatusOr<PeerLink> Connected(const std::string& target, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  // OK when `answered_by` is the instance `link` reaches. Otherwise the peer
  // restarted: drops the link's connection (if still the peer's) so the next
  // transfer says Hello again, and says UNAVAILABLE (retry).
  absl::Status CheckSameInstance(PeerLink& link, const std::string& answered_by)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Counts one transfer with `peer` (sent: this daemon was the source).
  void Record(KnownPeer& peer, bool sent, const TransferOutcome& outcome, size_t blocks_ok,
              const absl::Status& error) ABSL_LOCKS_EXCLUDED(mu_);
  // Every known peer, by address.
  std::vector<PeerStats> Peers() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Transport* const transport_;
  const PeerChannelFactory channels_;
  const std::string daemon_id_;

  Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<KnownPeer>> peers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_PEER_REGISTRY_H_
