#include "transfer/peer_transfer.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/checksum.h"
#include "spdlog/spdlog.h"
#include "transfer/landing_fill.h"

namespace kvtier {

absl::StatusOr<PeerRole> ParsePeerRole(absl::string_view name) {
  if (name == "prefill") return PeerRole::kPrefill;
  if (name == "decode") return PeerRole::kDecode;
  if (name == "both") return PeerRole::kBoth;
  return absl::InvalidArgumentError(
      absl::StrCat("peer role '", name, "' is not one of prefill, decode, both"));
}

const char* PeerRoleName(PeerRole role) {
  switch (role) {
    case PeerRole::kPrefill:
      return "prefill";
    case PeerRole::kDecode:
      return "decode";
    case PeerRole::kBoth:
      return "both";
  }
  return "both";
}

namespace {

bool IsSource(PeerRole r) { return r != PeerRole::kDecode; }
bool IsReceiver(PeerRole r) { return r != PeerRole::kPrefill; }

absl::Status Annotate(const absl::Status& s, absl::string_view prefix) {
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

// Calls that clean up after a transfer get a little time even when the
// transfer used up its deadline, so the other side frees what it holds now
// rather than at its ttl.
absl::Time CleanupDeadline(absl::Time deadline) {
  return std::max(deadline, absl::Now() + absl::Seconds(2));
}

// How long the other side should hold slots or pins for a transfer with
// this deadline: past our deadline (after which our transport has closed the
// connection, so nothing of this transfer can still arrive) with a margin.
absl::Duration HoldFor(absl::Time deadline) {
  return 2 * std::max(deadline - absl::Now(), absl::ZeroDuration()) + absl::Seconds(5);
}

}  // namespace

struct PeerTransfer::Peer {
  explicit Peer(std::string t, std::unique_ptr<PeerChannel> c)
      : target(std::move(t)), channel(std::move(c)) {}
  const std::string target;
  const std::unique_ptr<PeerChannel> channel;
  Mutex connect_mu;  // serializes (re)connecting
  std::optional<uint64_t> connection ABSL_GUARDED_BY(connect_mu);
  // Guarded by PeerTransfer::peers_mu_: the connection as ListPeers sees it
  // (without waiting on a connect in progress) and the counters.
  std::optional<uint64_t> listed_connection;
  PeerStats stats;
};

// A peer with the connection to use for one transfer.
struct PeerTransfer::Link {
  std::shared_ptr<Peer> peer;
  uint64_t connection = 0;
  std::string daemon_id;  // the instance the connection reaches
};

struct PeerTransfer::Landing {
  std::unique_ptr<BlockCache::PutBatch> batch;
  std::vector<PeerBlockInfo> blocks;  // the reserved prefix; address = local slot
  std::vector<uint8_t*> slots;        // null when already cached
  absl::Status refused;               // why blocks[blocks.size()] was not reserved
};

struct PeerTransfer::StageEntry {
  Landing landing;
  absl::Time expiry;
};

struct PeerTransfer::ExportEntry {
  std::vector<BlockCache::ReadHandle> handles;
  absl::Time expiry;
};

absl::StatusOr<std::unique_ptr<PeerTransfer>> PeerTransfer::Create(
    BlockCache* cache, std::unique_ptr<Transport> transport, std::string unavailable_reason,
    PeerChannelFactory channels, PeerTransferOptions options) {
  std::unique_ptr<PeerTransfer> p(new PeerTransfer(
      cache, std::move(transport), std::move(unavailable_reason), std::move(channels), options));
  if (p->transport_ != nullptr) {
    absl::Span<uint8_t> arena = cache->host_arena();
    absl::StatusOr<ExposedMemory> exposed = p->transport_->Expose(arena);
    if (!exposed.ok()) return Annotate(exposed.status(), "exposing the host arena to peers: ");
    p->exposed_ = *std::move(exposed);
  }
  return p;
}

PeerTransfer::PeerTransfer(BlockCache* cache, std::unique_ptr<Transport> transport,
                           std::string unavailable_reason, PeerChannelFactory channels,
                           PeerTransferOptions options)
    : cache_(cache),
      transport_(std::move(transport)),
      unavailable_reason_(std::move(unavailable_reason)),
      channels_(std::move(channels)),
      options_(options) {
  daemon_id_ = NewId();
}

PeerTransfer::~PeerTransfer() {
  // The transport first: once it is gone no peer operation can touch the
  // arena, and then the slots and pins held for peers are let go.
  transport_.reset();
  MutexLock lock(&mu_);
  stages_.clear();
  exports_.clear();
  quarantine_.clear();
}

std::string PeerTransfer::NewId() {
  MutexLock lock(&mu_);
  const uint64_t a = absl::Uniform<uint64_t>(bitgen_);
  const uint64_t b = absl::Uniform<uint64_t>(bitgen_);
  return absl::StrCat(absl::Hex(a, absl::kZeroPad16), absl::Hex(b, absl::kZeroPad16));
}

absl::Status PeerTransfer::CheckUsable(bool as_source, absl::Span<const BlockKey> keys,
                                       const std::string& peer) const {
  if (transport_ == nullptr) return absl::UnavailableError(unavailable_reason_);
  if (as_source && !IsSource(options_.role)) {
    return absl::FailedPreconditionError(
        "this daemon's peer.role is decode: it receives blocks and cannot send them");
  }
  if (!as_source && !IsReceiver(options_.role)) {
    return absl::FailedPreconditionError(
        "this daemon's peer.role is prefill: it sends blocks and cannot receive them");
  }
  if (keys.empty() || keys.size() > options_.max_keys) {
    return absl::InvalidArgumentError(
        absl::StrCat("a transfer takes 1..", options_.max_keys, " keys, not ", keys.size()));
  }
  if (peer.empty()) return absl::InvalidArgumentError("no peer address given");
  if (!options_.allowed_peers.empty() &&
      std::find(options_.allowed_peers.begin(), options_.allowed_peers.end(), peer) ==
          options_.allowed_peers.end()) {
    return absl::PermissionDeniedError(
        absl::StrCat("peer '", peer.substr(0, 200), "' is not in peer.allowed"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PeerTransfer::Link> PeerTransfer::Connected(const std::string& target,
                                                           absl::Time deadline) {
  constexpr size_t kMaxPeers = 4096;
  std::shared_ptr<Peer> peer;
  {
    MutexLock lock(&peers_mu_);
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
      it = peers_.emplace(target, std::make_shared<Peer>(target, channels_(target))).first;
      it->second->stats.address = target;
    }
    peer = it->second;
  }
  MutexLock lock(&peer->connect_mu);
  if (peer->connection.has_value() && transport_->Describe(*peer->connection).connected) {
    MutexLock stats(&peers_mu_);
    return Link{peer, *peer->connection, peer->stats.daemon_id};
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
      MutexLock stats(&peers_mu_);
      peer->listed_connection = *conn;
      peer->stats.daemon_id = hello->daemon_id;
      peer->stats.role = hello->role;
      peer->stats.connects += 1;
      return Link{peer, *conn, hello->daemon_id};
    }
  }
  MutexLock stats(&peers_mu_);
  peer->stats.last_error = std::string(error.message());
  return error;
}

absl::Status PeerTransfer::CheckSameInstance(Link& link, const std::string& answered_by) {
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
  MutexLock lock(&peers_mu_);
  link.peer->stats.last_error = std::string(error.message());
  return error;
}

absl::StatusOr<PeerTransfer::Landing> PeerTransfer::PrepareLanding(
    const NamespaceId& ns, absl::Span<const PeerBlockInfo> blocks) {
  Landing landing;
  absl::StatusOr<std::unique_ptr<BlockCache::PutBatch>> batch = cache_->BeginPut(ns);
  if (!batch.ok()) {
    return Annotate(batch.status(), "the receiving daemon cannot store this namespace: ");
  }
  landing.batch = *std::move(batch);
  for (const PeerBlockInfo& b : blocks) {
    absl::StatusOr<absl::Span<uint8_t>> slot =
        landing.batch->StartLanding(b.key, b.parent, b.size, b.checksum);
    if (!slot.ok()) {
      landing.refused = slot.status();
      break;
    }
    PeerBlockInfo placed = b;
    placed.already_cached = slot->empty();
    placed.address = slot->empty() ? 0 : reinterpret_cast<uint64_t>(slot->data());
    landing.slots.push_back(slot->empty() ? nullptr : slot->data());
    landing.blocks.push_back(std::move(placed));
  }
  return landing;
}

std::vector<absl::Status> PeerTransfer::FinishLanding(Landing& landing, size_t received) {
  const size_t n = landing.blocks.size();
  received = std::min(received, n);
  std::vector<absl::Status> out(n);
  size_t kept = landing.batch->KeepVerifiedPrefix(received);
  if (kept > 0) {
    absl::StatusOr<PutResult> committed = landing.batch->Commit();
    if (!committed.ok()) {
      for (auto& s : out) s = Annotate(committed.status(), "not stored on the receiver: ");
      return out;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (i < kept) {
      out[i] = absl::OkStatus();
    } else if (i == kept && kept < received) {
      out[i] =
          absl::DataLossError("the bytes received do not match the block's checksum; not stored");
    } else if (i == kept) {
      out[i] = absl::UnavailableError("the block's bytes did not arrive; not stored");
    } else {
      out[i] = absl::AbortedError("follows a block that was not stored");
    }
  }
  return out;
}

void PeerTransfer::Record(Peer& peer, bool sent, const TransferOutcome& outcome, size_t blocks_ok,
                          const absl::Status& error) {
  MutexLock lock(&peers_mu_);
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

namespace {

// The first status that is neither OK nor NOT_FOUND (blocks the source does
// not have are not a failure of the transfer).
absl::Status FirstFailure(const std::vector<absl::Status>& blocks) {
  for (const absl::Status& s : blocks) {
    if (!s.ok() && !absl::IsNotFound(s)) return s;
  }
  return absl::OkStatus();
}

size_t CountOk(const std::vector<absl::Status>& blocks) {
  return std::count_if(blocks.begin(), blocks.end(), [](const absl::Status& s) { return s.ok(); });
}

// Runs `ops` (one per block that needs bytes, `op_block[j]` naming its
// block) and returns how many leading blocks arrived whole, with the
// transport error of the first that did not.
struct Moved {
  size_t received = 0;
  absl::Status error;
  uint64_t bytes = 0;
  double seconds = 0;
};

Moved Move(Transport& transport, uint64_t connection, RmaKind kind, const std::vector<RmaOp>& ops,
           const std::vector<size_t>& op_block, size_t blocks, absl::Time deadline) {
  Moved m;
  m.received = blocks;
  if (ops.empty()) return m;
  const absl::Time start = absl::Now();
  std::vector<absl::Status> st = transport.Execute(connection, kind, ops, deadline);
  m.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  for (size_t j = 0; j < ops.size(); ++j) {
    if (!st[j].ok()) {
      m.received = op_block[j];
      m.error = st[j];
      break;
    }
    m.bytes += ops[j].bytes;
  }
  return m;
}

}  // namespace

absl::StatusOr<TransferOutcome> PeerTransfer::Push(const NamespaceId& ns,
                                                   absl::Span<const BlockKey> keys,
                                                   const std::string& target,
                                                   absl::Duration timeout) {
  if (absl::Status s = CheckUsable(true, keys, target); !s.ok()) return s;
  const absl::Time deadline =
      absl::Now() + (timeout > absl::ZeroDuration() ? timeout : options_.timeout);
  TransferOutcome out;
  out.blocks.assign(keys.size(), absl::NotFoundError("not cached on the source daemon"));
  out.sizes.assign(keys.size(), 0);
  absl::StatusOr<LookupResult> found = cache_->Lookup(ns, keys, false, absl::ZeroDuration());
  if (!found.ok()) return found.status();
  const size_t m = found->blocks.size();
  if (m == 0) return out;
  absl::StatusOr<std::vector<BlockCache::ReadHandle>> handles =
      cache_->Read(ns, keys.subspan(0, m), /*verify=*/false);
  if (!handles.ok()) {
    for (size_t i = 0; i < m; ++i) {
      out.blocks[i] = absl::AbortedError(
          absl::StrCat("the source's blocks changed during the transfer; retry (",
                       handles.status().message(), ")"));
    }
    return out;
  }
  std::vector<PeerBlockInfo> blocks(m);
  for (size_t i = 0; i < m; ++i) {
    const BlockCache::ReadHandle& h = (*handles)[i];
    blocks[i] = {h.key(), h.parent(), h.bytes().size(), h.checksum(), 0, false};
    out.sizes[i] = h.bytes().size();
  }
  auto fail_all = [&](const absl::Status& s, size_t from) {
    for (size_t i = from; i < m; ++i) out.blocks[i] = s;
  };
  absl::StatusOr<Link> link = Connected(target, deadline);
  if (!link.ok()) {
    fail_all(link.status(), 0);
    return out;
  }
  Peer& peer = *link->peer;
  absl::StatusOr<StageResult> stage = peer.channel->Stage(ns, blocks, HoldFor(deadline), deadline);
  if (!stage.ok()) {
    fail_all(Annotate(stage.status(), "the receiver refused the transfer: "), 0);
    Record(peer, true, out, 0, FirstFailure(out.blocks));
    return out;
  }
  if (absl::Status same = CheckSameInstance(*link, stage->daemon_id); !same.ok()) {
    // Its addresses belong to another arena than the connection reaches.
    if (!stage->stage_id.empty()) {
      (void)peer.channel->Commit(stage->stage_id, 0, CleanupDeadline(deadline));
    }
    fail_all(same, 0);
    Record(peer, true, out, 0, same);
    return out;
  }
  size_t k = std::min(stage->blocks.size(), m);
  if (k < m) {
    out.blocks[k] =
        Annotate(stage->refused.ok() ? absl::InternalError("no reason given") : stage->refused,
                 "the receiver could not take the block: ");
    fail_all(absl::AbortedError("follows a block that was not transferred"), k + 1);
  }
  std::vector<RmaOp> ops;
  std::vector<size_t> op_block;
  for (size_t i = 0; i < k; ++i) {
    const PeerBlockInfo& placed = stage->blocks[i];
    if (placed.key != blocks[i].key) {
      // A receiver that answers for other blocks than asked is broken; send
      // nothing from here on, and tell it nothing from here on arrived.
      fail_all(absl::InternalError("the receiver staged a different block"), i);
      k = i;
      break;
    }
    if (placed.already_cached) continue;
    // Put reads the buffer only; RmaOp's pointer serves both directions.
    ops.push_back(
        {const_cast<uint8_t*>((*handles)[i].bytes().data()), placed.address, blocks[i].size});
    op_block.push_back(i);
  }
  Moved moved = Move(*transport_, link->connection, RmaKind::kPut, ops, op_block, k, deadline);
  out.bytes_moved = moved.bytes;
  out.transport_seconds = moved.seconds;
  out.lanes = transport_->Describe(link->connection).lanes;
  if (!stage->stage_id.empty()) {
    absl::StatusOr<std::vector<absl::Status>> committed = peer.channel->Commit(
        stage->stage_id, static_cast<uint32_t>(moved.received), CleanupDeadline(deadline));
    if (!committed.ok() || committed->size() < k) {
      const absl::Status why =
          committed.ok() ? absl::InternalError("malformed Commit answer") : committed.status();
      for (size_t i = 0; i < k; ++i) {
        if (out.blocks[i].ok() || absl::IsNotFound(out.blocks[i])) {
          out.blocks[i] = Annotate(why, "the receiver did not confirm the block: ");
        }
      }
    } else {
      for (size_t i = 0; i < k; ++i) {
        if (i == moved.received && !moved.error.ok()) {
          out.blocks[i] = Annotate(moved.error, "sending the block failed: ");
        } else {
          out.blocks[i] = (*committed)[i];
        }
        if (absl::IsDataLoss(out.blocks[i])) {
          // Our copy may be the bad one: check it as any read would.
          const BlockCache::ReadHandle& h = (*handles)[i];
          if (Checksum64(h.bytes()) != h.checksum()) cache_->ReportChecksumMismatch(h);
        }
      }
    }
  }
  Record(peer, true, out, CountOk(out.blocks), FirstFailure(out.blocks));
  return out;
}

absl::StatusOr<TransferOutcome> PeerTransfer::Pull(const NamespaceId& ns,
                                                   absl::Span<const BlockKey> keys,
                                                   const std::string& target,
                                                   absl::Duration timeout) {
  if (absl::Status s = CheckUsable(false, keys, target); !s.ok()) return s;
  if (absl::StatusOr<uint64_t> open = cache_->NamespaceBlockBytes(ns); !open.ok()) {
    return open.status();
  }
  const absl::Time deadline =
      absl::Now() + (timeout > absl::ZeroDuration() ? timeout : options_.timeout);
  TransferOutcome out;
  out.blocks.assign(keys.size(), absl::NotFoundError("not cached on the peer"));
  out.sizes.assign(keys.size(), 0);
  auto fail_from = [&](const absl::Status& s, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) out.blocks[i] = s;
  };
  absl::StatusOr<Link> link = Connected(target, deadline);
  if (!link.ok()) {
    fail_from(link.status(), 0, keys.size());
    return out;
  }
  Peer& peer = *link->peer;
  absl::StatusOr<ExportResult> exported =
      peer.channel->Export(ns, keys, HoldFor(deadline), deadline);
  if (!exported.ok()) {
    fail_from(Annotate(exported.status(), "the source refused the transfer: "), 0, keys.size());
    Record(peer, false, out, 0, FirstFailure(out.blocks));
    return out;
  }
  if (absl::Status same = CheckSameInstance(*link, exported->daemon_id); !same.ok()) {
    if (!exported->export_id.empty()) {
      (void)peer.channel->ReleaseExport(exported->export_id, CleanupDeadline(deadline));
    }
    fail_from(same, 0, keys.size());
    Record(peer, false, out, 0, same);
    return out;
  }
  size_t m = std::min(exported->blocks.size(), keys.size());
  for (size_t i = 0; i < m; ++i) {
    if (exported->blocks[i].key != keys[i]) {
      fail_from(absl::InternalError("the source exported a different block"), i, keys.size());
      m = i;
      break;
    }
    out.sizes[i] = exported->blocks[i].size;
  }
  absl::StatusOr<Landing> landing =
      PrepareLanding(ns, absl::MakeConstSpan(exported->blocks).subspan(0, m));
  if (!landing.ok()) {
    if (!exported->export_id.empty()) {
      (void)peer.channel->ReleaseExport(exported->export_id, CleanupDeadline(deadline));
    }
    return landing.status();
  }
  const size_t k = landing->blocks.size();
  if (k < m) {
    out.blocks[k] = Annotate(landing->refused, "this daemon could not take the block: ");
    fail_from(absl::AbortedError("follows a block that was not transferred"), k + 1, m);
  }
  std::vector<RmaOp> ops;
  std::vector<size_t> op_block;
  for (size_t i = 0; i < k; ++i) {
    if (landing->slots[i] == nullptr) continue;
    ops.push_back({landing->slots[i], exported->blocks[i].address, exported->blocks[i].size});
    op_block.push_back(i);
  }
  Moved moved = Move(*transport_, link->connection, RmaKind::kGet, ops, op_block, k, deadline);
  out.bytes_moved = moved.bytes;
  out.transport_seconds = moved.seconds;
  out.lanes = transport_->Describe(link->connection).lanes;
  std::vector<absl::Status> landed = FinishLanding(*landing, moved.received);
  for (size_t i = 0; i < k; ++i) {
    out.blocks[i] = (i == moved.received && !moved.error.ok())
                        ? Annotate(moved.error, "fetching the block failed: ")
                        : landed[i];
  }
  if (!exported->export_id.empty()) {
    absl::Status released =
        peer.channel->ReleaseExport(exported->export_id, CleanupDeadline(deadline));
    if (!released.ok()) {
      spdlog::warn("peer {} did not release export {}: {} (it lapses on its own)", target,
                   exported->export_id, released.ToString());
    }
  }
  Record(peer, false, out, CountOk(out.blocks), FirstFailure(out.blocks));
  return out;
}

absl::StatusOr<StageResult> PeerTransfer::Stage(const NamespaceId& ns,
                                                std::vector<PeerBlockInfo> blocks,
                                                absl::Duration ttl) {
  if (transport_ == nullptr) return absl::UnavailableError(unavailable_reason_);
  if (!IsReceiver(options_.role)) {
    return absl::FailedPreconditionError("this daemon's peer.role is prefill: it takes no blocks");
  }
  if (blocks.empty() || blocks.size() > options_.max_keys) {
    return absl::InvalidArgumentError(
        absl::StrCat("a stage takes 1..", options_.max_keys, " blocks, not ", blocks.size()));
  }
  ExpireStale();
  if (pending() >= options_.max_pending) return TooManyPending();
  absl::StatusOr<Landing> landing = PrepareLanding(ns, blocks);
  if (!landing.ok()) return landing.status();
  // Before the sender learns the slots: what they held must not verify.
  FillLandingSlots(landing->slots, landing->blocks);
  StageResult result;
  result.daemon_id = daemon_id_;
  result.blocks = landing->blocks;
  result.refused = landing->refused;
  if (landing->blocks.empty()) return result;
  result.stage_id = NewId();
  auto entry = std::make_unique<StageEntry>();
  entry->landing = *std::move(landing);
  entry->expiry = absl::Now() + std::clamp(ttl, absl::Seconds(1), options_.max_hold);
  {
    MutexLock lock(&mu_);
    if (stages_.size() + exports_.size() < options_.max_pending) {
      stages_.emplace(result.stage_id, std::move(entry));
      return result;
    }
  }
  return TooManyPending();  // `entry` frees its slots outside the lock
}

absl::StatusOr<std::vector<absl::Status>> PeerTransfer::Commit(const std::string& stage_id,
                                                               uint32_t received) {
  std::unique_ptr<StageEntry> entry;
  {
    MutexLock lock(&mu_);
    auto it = stages_.find(stage_id);
    if (it == stages_.end()) {
      return absl::NotFoundError(
          absl::StrCat("no pending stage '", stage_id, "' (unknown, or it expired)"));
    }
    entry = std::move(it->second);
    stages_.erase(it);
  }
  std::vector<absl::Status> statuses = FinishLanding(entry->landing, received);
  if (entry->landing.batch->held_slots() > 0) {
    // Blocks the sender did not complete: it may still have bytes in flight
    // toward their slots, so they are not handed to other blocks yet.
    MutexLock lock(&mu_);
    quarantine_.emplace_back(absl::Now() + options_.quarantine, std::move(entry->landing.batch));
  }
  return statuses;
}

absl::StatusOr<ExportResult> PeerTransfer::Export(const NamespaceId& ns,
                                                  absl::Span<const BlockKey> keys,
                                                  absl::Duration ttl) {
  if (transport_ == nullptr) return absl::UnavailableError(unavailable_reason_);
  if (!IsSource(options_.role)) {
    return absl::FailedPreconditionError("this daemon's peer.role is decode: it sends no blocks");
  }
  if (keys.empty() || keys.size() > options_.max_keys) {
    return absl::InvalidArgumentError(
        absl::StrCat("an export takes 1..", options_.max_keys, " keys, not ", keys.size()));
  }
  ExpireStale();
  if (pending() >= options_.max_pending) return TooManyPending();
  absl::StatusOr<LookupResult> found = cache_->Lookup(ns, keys, false, absl::ZeroDuration());
  if (!found.ok()) return found.status();
  ExportResult result;
  result.daemon_id = daemon_id_;
  const size_t m = found->blocks.size();
  if (m == 0) return result;
  // The receiver verifies every byte against the checksum, so no pass here.
  absl::StatusOr<std::vector<BlockCache::ReadHandle>> handles =
      cache_->Read(ns, keys.subspan(0, m), /*verify=*/false);
  if (!handles.ok()) {
    return absl::AbortedError(
        absl::StrCat("blocks changed during the export; retry (", handles.status().message(), ")"));
  }
  for (const BlockCache::ReadHandle& h : *handles) {
    result.blocks.push_back({h.key(), h.parent(), h.bytes().size(), h.checksum(),
                             reinterpret_cast<uint64_t>(h.bytes().data()), false});
  }
  result.export_id = NewId();
  auto entry = std::make_unique<ExportEntry>();
  entry->handles = *std::move(handles);
  entry->expiry = absl::Now() + std::clamp(ttl, absl::Seconds(1), options_.max_hold);
  {
    MutexLock lock(&mu_);
    if (stages_.size() + exports_.size() < options_.max_pending) {
      exports_.emplace(result.export_id, std::move(entry));
      return result;
    }
  }
  return TooManyPending();  // `entry` unpins outside the lock
}

absl::Status PeerTransfer::ReleaseExport(const std::string& export_id) {
  std::unique_ptr<ExportEntry> entry;  // unpinned after the lock is let go
  MutexLock lock(&mu_);
  auto it = exports_.find(export_id);
  if (it == exports_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no pending export '", export_id, "' (unknown, or it expired)"));
  }
  entry = std::move(it->second);
  exports_.erase(it);
  return absl::OkStatus();
}

void PeerTransfer::ExpireStale() {
  std::vector<std::unique_ptr<StageEntry>> stages;
  std::vector<std::unique_ptr<ExportEntry>> exports;
  std::vector<std::unique_ptr<BlockCache::PutBatch>> released;
  const absl::Time now = absl::Now();
  {
    MutexLock lock(&mu_);
    for (auto& [until, batch] : quarantine_) {
      if (until <= now) released.push_back(std::move(batch));
    }
    std::erase_if(quarantine_, [](const auto& q) { return q.second == nullptr; });
    absl::erase_if(stages_, [&](auto& kv) {
      if (kv.second->expiry > now) return false;
      stages.push_back(std::move(kv.second));
      return true;
    });
    absl::erase_if(exports_, [&](auto& kv) {
      if (kv.second->expiry > now) return false;
      exports.push_back(std::move(kv.second));
      return true;
    });
  }
  if (!stages.empty() || !exports.empty()) {
    spdlog::warn("dropped {} stages and {} exports that their peers never finished", stages.size(),
                 exports.size());
  }
}

absl::Status PeerTransfer::TooManyPending() const {
  return absl::ResourceExhaustedError(
      absl::StrCat(options_.max_pending, " transfers are already pending on this daemon"));
}

size_t PeerTransfer::pending() {
  MutexLock lock(&mu_);
  return stages_.size() + exports_.size();
}

std::vector<PeerStats> PeerTransfer::Peers() {
  std::vector<std::shared_ptr<Peer>> peers;
  {
    MutexLock lock(&peers_mu_);
    for (auto& [target, peer] : peers_) peers.push_back(peer);
  }
  std::vector<PeerStats> out;
  for (auto& peer : peers) {
    std::optional<uint64_t> conn;
    {
      MutexLock lock(&peers_mu_);
      conn = peer->listed_connection;
    }
    ConnectionInfo info;
    if (conn.has_value()) info = transport_->Describe(*conn);
    MutexLock lock(&peers_mu_);
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
