#include "transfer/peer_registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transfer/transfer_steps.h"

namespace kvtier {

PeerRegistry::PeerRegistry(Transport* transport, PeerChannelFactory channels, std::string daemon_id)
    : transport_(transport), channels_(std::move(channels)), daemon_id_(std::move(daemon_id)) {}

absl::StatusOr<PeerLink> PeerRegistry::Connected(const std::string& target, absl::Time deadline) {
  std::shared_ptr<KnownPeer> peer;
  {
    MutexLock lock(&mu_);
    auto it = peers_.find(target);
    if (it == peers_.end()) {
      if (peers_.size() >= kMaxPeers) {
        // Forget peers no transfer is using and that are not connected.
        absl::erase_if(peers_, [&](const auto& kv) {
          return kv.second.use_count() == 1 &&
                 (!kv.second->listed_connection.has_value() ||
                  !transport_->Describe(*kv.second->listed_connection).connected);
        });
      }
      if (peers_.size() >= kMaxPeers) {
        return absl::ResourceExhaustedError(
            absl::StrCat("this daemon is connected to ", kMaxPeers, " peers already"));
      }
      it = peers_.emplace(target, std::make_shared<KnownPeer>(target, channels_(target))).first;
      it->second->stats.address = target;
    }
    peer = it->second;
  }
  MutexLock lock(&peer->connect_mu);
  if (peer->connection.has_value() && transport_->Describe(*peer->connection).connected) {
    MutexLock stats(&mu_);
    return PeerLink{peer, *peer->connection, peer->stats.daemon_id};
  }
  absl::StatusOr<PeerHello> hello = peer->channel->Hello(daemon_id_, deadline);
  absl::Status error;
  if (!hello.ok()) {
    error = Annotate(hello.status(), absl::StrCat("peer ", target, " did not answer Hello: "));
  } else {
    absl::StatusOr<uint64_t> conn = transport_->Connect(hello->transport_address, hello->memory);
    if (!conn.ok()) {
      error = Annotate(conn.status(), absl::StrCat("connecting to peer ", target, ": "));
    } else {
      if (peer->connection.has_value()) transport_->Disconnect(*peer->connection);
      peer->connection = *conn;
      MutexLock stats(&mu_);
      peer->listed_connection = *conn;
      peer->stats.daemon_id = hello->daemon_id;
      peer->stats.role = hello->role;
      peer->stats.connects += 1;
      return PeerLink{peer, *conn, hello->daemon_id};
    }
  }
  MutexLock stats(&mu_);
  peer->stats.last_error = std::string(error.message());
  return error;
}

absl::Status PeerRegistry::CheckSameInstance(PeerLink& link, const std::string& answered_by) {
  if (answered_by == link.daemon_id) return absl::OkStatus();
  {
    MutexLock lock(&link.peer->connect_mu);
    if (link.peer->connection == link.connection) {
      transport_->Disconnect(link.connection);
      link.peer->connection.reset();
    }
  }
  const absl::Status error = absl::UnavailableError(
      absl::StrCat("peer ", link.peer->target, " restarted during the transfer (now daemon ",
                   answered_by, ", connected to ", link.daemon_id, "); retry"));
  MutexLock lock(&mu_);
  link.peer->stats.last_error = std::string(error.message());
  return error;
}

void PeerRegistry::Record(KnownPeer& peer, bool sent, const TransferOutcome& outcome,
                          size_t blocks_ok, const absl::Status& error) {
  MutexLock lock(&mu_);
  PeerStats& s = peer.stats;
  s.transfers += 1;
  (sent ? s.bytes_sent : s.bytes_received) += outcome.bytes_moved;
  (sent ? s.blocks_sent : s.blocks_received) += blocks_ok;
  s.transport_seconds += outcome.transport_seconds;
  if (!outcome.lanes.empty()) s.lanes = outcome.lanes;
  if (!error.ok()) {
    s.failed_transfers += 1;
    s.last_error = std::string(error.message());
  }
}

std::vector<PeerStats> PeerRegistry::Peers() {
  std::vector<std::shared_ptr<KnownPeer>> peers;
  {
    MutexLock lock(&mu_);
    for (auto& [target, peer] : peers_) peers.push_back(peer);
  }
  std::vector<PeerStats> out;
  for (auto& peer : peers) {
    std::optional<uint64_t> conn;
    {
      MutexLock lock(&mu_);
      conn = peer->listed_connection;
    }
    ConnectionInfo info;
    if (conn.has_value()) info = transport_->Describe(*conn);
    MutexLock lock(&mu_);
    PeerStats s = peer->stats;
    s.connected = info.connected;
    if (!info.lanes.empty()) s.lanes = info.lanes;
    if (!info.connected && !info.last_error.empty() && s.last_error.empty()) {
      s.last_error = info.last_error;
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const PeerStats& a, const PeerStats& b) { return a.address < b.address; });
  return out;
}

}  // namespace kvtier
