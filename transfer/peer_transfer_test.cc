// PeerTransfer end to end within one process, in every build (UCX or not):
// two daemons' worth of PeerTransfer, each over its own BlockCache, their
// bytes moved by LoopbackTransport (wrapped in FaultInjectingTransport) and
// their peer calls made by InProcessPeers. Push and pull land byte-exact;
// failed, torn and cut operations land nothing half-stored and the next
// transfer works; a restarted peer is detected and reached again; stages
// and exports lapse at their expiry.
#include "transfer/peer_transfer.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/clock.h"
#include "storage/block_cache.h"
#include "testing/faulty_transport.h"
#include "testing/in_process_peer_channel.h"
#include "testing/keyed_chain.h"
#include "testing/loopback_transport.h"
#include "transfer/transport_wrapper.h"

namespace kvtier {
namespace {

constexpr uint64_t kBlock = 64 * 1024;
constexpr char kPrefill[] = "prefill:1";
constexpr char kDecode[] = "decode:1";

BlockKey Key(const std::string& k) { return *BlockKey::Create(k); }

std::vector<BlockKey> Keys(const std::string& prefix, int n) {
  std::vector<BlockKey> out;
  for (int i = 0; i < n; ++i) out.push_back(Key(absl::StrCat(prefix, "-", i)));
  return out;
}

// A transport that cuts its connection in the middle of the next Execute
// (CutNextAfter: the first `ops` ops run, then the connection is closed,
// and the rest meet a closed connection), or runs a hook after the next
// Execute.
class CuttingTransport final : public TransportWrapper {
 public:
  explicit CuttingTransport(std::unique_ptr<Transport> inner)
      : TransportWrapper(std::move(inner)) {}
  void CutNextAfter(size_t ops) { cut_after_ = ops; }
  void AfterNextExecute(std::function<void()> f) { after_ = std::move(f); }

  std::vector<absl::Status> Execute(uint64_t connection, RmaKind kind, absl::Span<const RmaOp> ops,
                                    absl::Time deadline) override {
    if (after_ != nullptr) {
      std::vector<absl::Status> out = target()->Execute(connection, kind, ops, deadline);
      std::exchange(after_, nullptr)();
      return out;
    }
    if (cut_after_ < 0 || static_cast<size_t>(cut_after_) >= ops.size()) {
      return target()->Execute(connection, kind, ops, deadline);
    }
    const size_t n = static_cast<size_t>(cut_after_);
    cut_after_ = -1;
    std::vector<absl::Status> out =
        target()->Execute(connection, kind, ops.subspan(0, n), deadline);
    target()->Disconnect(connection);
    std::vector<absl::Status> rest = target()->Execute(connection, kind, ops.subspan(n), deadline);
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
  }

 private:
  // Tests set these between transfers only.
  long cut_after_ = -1;
  std::function<void()> after_;
};

// One daemon's worth: a cache and the PeerTransfer over it, answering at
// `address` among `peers`.
struct Node {
  SystemClock clock;
  std::unique_ptr<BlockCache> cache;
  FaultInjectingTransport* faults = nullptr;  // owned by `transfer`
  CuttingTransport* cut = nullptr;            // owned by `transfer`
  std::unique_ptr<PeerTransfer> transfer;
  NamespaceId ns;

  static std::unique_ptr<Node> Start(InProcessPeers& peers, const std::string& address,
                                     PeerTransferOptions options) {
    auto n = std::make_unique<Node>();
    BlockCacheOptions o;
    o.host_bytes = 8ull << 20;
    o.slab_bytes = 1ull << 20;
    o.max_block_bytes = 1ull << 20;
    n->cache = *BlockCache::Create(o, &n->clock);
    NamespaceSpec spec;
    spec.model_id = "pd-model";
    spec.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};  // 64 KiB blocks
    n->ns = n->cache->OpenNamespace(spec)->id;
    auto faulty = std::make_unique<FaultInjectingTransport>(std::make_unique<LoopbackTransport>(),
                                                            TransportFaultPlan{});
    n->faults = faulty.get();
    auto cutting = std::make_unique<CuttingTransport>(std::move(faulty));
    n->cut = cutting.get();
    absl::StatusOr<std::unique_ptr<PeerTransfer>> t = PeerTransfer::Create(
        n->cache.get(), std::move(cutting), "unused", peers.factory(), std::move(options));
    EXPECT_TRUE(t.ok()) << t.status();
    n->transfer = *std::move(t);
    peers.Place(address, n->transfer.get());
    return n;
  }

  // Stores `keys` as one chain, each block's bytes KeyedBytes(key, kBlock).
  void PutChain(const std::vector<BlockKey>& keys) {
    absl::Status s = PutKeyedChain(*cache, ns, keys, kBlock);
    ASSERT_TRUE(s.ok()) << s;
  }

  size_t Matched(const std::vector<BlockKey>& keys) {
    absl::StatusOr<LookupResult> r = cache->Lookup(ns, keys, false, absl::ZeroDuration());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->blocks.size() : 0;
  }

  // Serves exactly `n` leading blocks of `keys`, each byte-exact.
  void ExpectHasExactly(const std::vector<BlockKey>& keys, size_t n) {
    ASSERT_EQ(Matched(keys), n);
    if (n == 0) return;
    absl::Status s = ReadsKeyedBytes(*cache, ns, absl::MakeConstSpan(keys).subspan(0, n), kBlock);
    EXPECT_TRUE(s.ok()) << s;
  }

  uint64_t HostUsed() { return cache->Snapshot().host.used_bytes; }
};

PeerTransferOptions Options(PeerRole role) {
  PeerTransferOptions o;
  o.role = role;
  o.timeout = absl::Seconds(5);
  return o;
}

size_t LeadingOk(const TransferOutcome& r) {
  size_t n = 0;
  while (n < r.blocks.size() && r.blocks[n].ok()) ++n;
  return n;
}

class PeerTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    prefill_ = Node::Start(peers_, kPrefill, Options(PeerRole::kPrefill));
    decode_ = Node::Start(peers_, kDecode, Options(PeerRole::kDecode));
    ASSERT_EQ(prefill_->ns, decode_->ns);
    ns_ = prefill_->ns;
  }

  absl::StatusOr<TransferOutcome> Push(const std::vector<BlockKey>& keys) {
    return prefill_->transfer->Push(ns_, keys, kDecode, absl::ZeroDuration());
  }
  absl::StatusOr<TransferOutcome> Pull(const std::vector<BlockKey>& keys) {
    return decode_->transfer->Pull(ns_, keys, kPrefill, absl::ZeroDuration());
  }

  InProcessPeers peers_;
  std::unique_ptr<Node> prefill_;
  std::unique_ptr<Node> decode_;
  NamespaceId ns_;
};

TEST_F(PeerTransferTest, PushLandsEveryBlockByteExactOnTheReceiver) {
  std::vector<BlockKey> keys = Keys("push", 5);
  prefill_->PutChain(keys);
  keys.push_back(Key("push-not-cached"));
  absl::StatusOr<TransferOutcome> r = Push(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->blocks.size(), 6u);
  EXPECT_EQ(LeadingOk(*r), 5u) << r->blocks[LeadingOk(*r)];
  EXPECT_EQ(r->blocks[5].code(), absl::StatusCode::kNotFound) << r->blocks[5];
  EXPECT_EQ(r->sizes, (std::vector<uint64_t>{kBlock, kBlock, kBlock, kBlock, kBlock, 0}));
  EXPECT_EQ(r->bytes_moved, 5 * kBlock);
  EXPECT_EQ(r->lanes, "loopback");
  decode_->ExpectHasExactly(keys, 5);
  EXPECT_EQ(decode_->transfer->pending(), 0u);

  // Again: every block is already there, no byte moves.
  r = Push(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 5u);
  EXPECT_EQ(r->bytes_moved, 0u);

  std::vector<PeerStats> peers = prefill_->transfer->Peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].address, kDecode);
  EXPECT_EQ(peers[0].daemon_id, decode_->transfer->daemon_id());
  EXPECT_EQ(peers[0].role, "decode");
  EXPECT_TRUE(peers[0].connected);
  EXPECT_EQ(peers[0].lanes, "loopback");
  EXPECT_EQ(peers[0].bytes_sent, 5 * kBlock);
  EXPECT_EQ(peers[0].blocks_sent, 10u);  // 5 sent + 5 already there
  EXPECT_EQ(peers[0].transfers, 2u);
  EXPECT_EQ(peers[0].failed_transfers, 0u);
  EXPECT_EQ(peers[0].connects, 1u);
  EXPECT_TRUE(decode_->transfer->Peers().empty());
}

TEST_F(PeerTransferTest, PullFetchesTheCachedPrefixByteExactAndReleasesThePins) {
  const std::vector<BlockKey> keys = Keys("pull", 5);
  prefill_->PutChain({keys[0], keys[1], keys[2]});
  absl::StatusOr<TransferOutcome> r = Pull(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 3u);
  EXPECT_EQ(r->blocks[3].code(), absl::StatusCode::kNotFound) << r->blocks[3];
  EXPECT_EQ(r->blocks[4].code(), absl::StatusCode::kNotFound) << r->blocks[4];
  EXPECT_EQ(r->bytes_moved, 3 * kBlock);
  decode_->ExpectHasExactly(keys, 3);
  // The source's pins went back with ReleaseExport: it can delete them.
  EXPECT_EQ(prefill_->transfer->pending(), 0u);
  EXPECT_TRUE(prefill_->cache->Delete(ns_, {keys[2]}, false).ok());
  std::vector<PeerStats> peers = decode_->transfer->Peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].address, kPrefill);
  EXPECT_EQ(peers[0].role, "prefill");
  EXPECT_EQ(peers[0].bytes_received, 3 * kBlock);
  EXPECT_EQ(peers[0].blocks_received, 3u);
}

TEST_F(PeerTransferTest, RolesAndBadInputAreRefusedAndChangeNothing) {
  const std::vector<BlockKey> keys = Keys("bad", 2);
  prefill_->PutChain(keys);
  EXPECT_EQ(decode_->transfer->Push(ns_, keys, kPrefill, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(prefill_->transfer->Pull(ns_, keys, kDecode, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Push({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(prefill_->transfer->Push(ns_, keys, "", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A receiver that is not one refuses every block.
  absl::StatusOr<TransferOutcome> r =
      prefill_->transfer->Push(ns_, keys, kPrefill, absl::ZeroDuration());
  ASSERT_TRUE(r.ok()) << r.status();
  for (const absl::Status& b : r->blocks) {
    EXPECT_EQ(b.code(), absl::StatusCode::kFailedPrecondition) << b;
  }
  // An address nobody answers at: every block UNAVAILABLE.
  r = prefill_->transfer->Push(ns_, keys, "nowhere:1", absl::ZeroDuration());
  ASSERT_TRUE(r.ok()) << r.status();
  for (const absl::Status& b : r->blocks) EXPECT_EQ(b.code(), absl::StatusCode::kUnavailable) << b;
  decode_->ExpectHasExactly(keys, 0);
  EXPECT_EQ(decode_->transfer->pending(), 0u);
  EXPECT_EQ(prefill_->transfer->pending(), 0u);
}

TEST_F(PeerTransferTest, FailedAndTornOperationsLandNothingAndTheNextTransferWorks) {
  const std::vector<BlockKey> keys = Keys("fault", 10);
  prefill_->PutChain(keys);
  // The link dies after 4 block operations: blocks 0..3 land, 4 fails with
  // the transport's error, the rest are aborted (their parent is missing).
  prefill_->faults->SetPlan({.fail_after_ops = 4});
  absl::StatusOr<TransferOutcome> r = Push(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 4u);
  EXPECT_EQ(r->blocks[4].code(), absl::StatusCode::kUnavailable) << r->blocks[4];
  for (int i = 5; i < 10; ++i) EXPECT_EQ(r->blocks[i].code(), absl::StatusCode::kAborted) << i;
  EXPECT_EQ(r->bytes_moved, 4 * kBlock);
  decode_->ExpectHasExactly(keys, 4);

  // Every operation torn (half the bytes, reported OK): the receiver's
  // checksum refuses the first block sent; nothing more lands.
  prefill_->faults->SetPlan({.torn = 1.0});
  r = Push(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 4u);
  EXPECT_EQ(r->blocks[4].code(), absl::StatusCode::kDataLoss) << r->blocks[4];
  for (int i = 5; i < 10; ++i) EXPECT_EQ(r->blocks[i].code(), absl::StatusCode::kAborted) << i;
  decode_->ExpectHasExactly(keys, 4);
  // The source's own copy was fine: it still serves it.
  EXPECT_EQ(prefill_->Matched(keys), 10u);

  // A torn pull: the same, on the receiver's own gets.
  const std::vector<BlockKey> pulled = Keys("fault-pull", 3);
  prefill_->PutChain(pulled);
  decode_->faults->SetPlan({.torn = 1.0});
  r = Pull(pulled);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->blocks[0].code(), absl::StatusCode::kDataLoss) << r->blocks[0];
  EXPECT_EQ(r->blocks[1].code(), absl::StatusCode::kAborted) << r->blocks[1];
  decode_->ExpectHasExactly(pulled, 0);
  EXPECT_EQ(prefill_->transfer->pending(), 0u);

  // Faults stop: the rest goes through, over the same connection.
  prefill_->faults->SetPlan({});
  decode_->faults->SetPlan({});
  r = Push(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 10u);
  EXPECT_EQ(r->bytes_moved, 6 * kBlock);
  decode_->ExpectHasExactly(keys, 10);
  r = Pull(pulled);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 3u);
  decode_->ExpectHasExactly(pulled, 3);
  std::vector<PeerStats> peers = prefill_->transfer->Peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].failed_transfers, 2u);
  EXPECT_EQ(peers[0].transfers, 3u);
  EXPECT_EQ(peers[0].connects, 1u);
}

TEST_F(PeerTransferTest, ALinkCutMidPushLandsOnlyWholeBlocksAndIsRemade) {
  const std::vector<BlockKey> keys = Keys("cut", 6);
  prefill_->PutChain(keys);
  prefill_->cut->CutNextAfter(2);
  absl::StatusOr<TransferOutcome> r = Push(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 2u);
  EXPECT_EQ(r->blocks[2].code(), absl::StatusCode::kUnavailable) << r->blocks[2];
  for (int i = 3; i < 6; ++i) EXPECT_EQ(r->blocks[i].code(), absl::StatusCode::kAborted) << i;
  decode_->ExpectHasExactly(keys, 2);
  EXPECT_EQ(decode_->transfer->pending(), 0u);
  std::vector<PeerStats> peers = prefill_->transfer->Peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_FALSE(peers[0].connected);

  // The next push finds the connection closed and makes a new one.
  r = Push(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 6u);
  EXPECT_EQ(r->bytes_moved, 4 * kBlock);
  decode_->ExpectHasExactly(keys, 6);
  peers = prefill_->transfer->Peers();
  EXPECT_TRUE(peers[0].connected);
  EXPECT_EQ(peers[0].connects, 2u);
}

TEST_F(PeerTransferTest, AReceiverGoneBeforeCommitConfirmsNothingAndIndexesNothing) {
  const std::vector<BlockKey> keys = Keys("gone", 3);
  prefill_->PutChain(keys);
  // The receiver stops answering its peer calls after the puts, before
  // Commit: whatever bytes reached it, the source cannot know they were
  // stored, so no block is reported stored, and none is indexed.
  prefill_->cut->AfterNextExecute([&] { peers_.Remove(kDecode); });
  absl::StatusOr<TransferOutcome> r = Push(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const absl::Status& b : r->blocks) {
    EXPECT_EQ(b.code(), absl::StatusCode::kUnavailable) << b;
    EXPECT_TRUE(absl::StrContains(b.message(), "did not confirm")) << b;
  }
  EXPECT_EQ(r->bytes_moved, 3 * kBlock);
  decode_->ExpectHasExactly(keys, 0);
  EXPECT_EQ(decode_->transfer->pending(), 1u);  // the stage waits out its ttl

  // Back: the next push (other blocks) lands.
  peers_.Place(kDecode, decode_->transfer.get());
  const std::vector<BlockKey> more = Keys("gone-more", 2);
  prefill_->PutChain(more);
  r = Push(more);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 2u) << r->blocks[LeadingOk(*r) % 2];
  decode_->ExpectHasExactly(more, 2);
  EXPECT_EQ(decode_->transfer->pending(), 1u);
}

TEST_F(PeerTransferTest, ARestartedReceiverIsDetectedItsStaleStateDroppedAndReachedAgain) {
  const std::vector<BlockKey> first = Keys("restart-a", 2);
  prefill_->PutChain(first);
  ASSERT_EQ(LeadingOk(*Push(first)), 2u);

  // The receiver restarts: a new daemon (new instance id, new arena) at the
  // same address. The old connection still looks alive to the transport.
  PeerTransferOptions options = Options(PeerRole::kDecode);
  options.quarantine = absl::ZeroDuration();
  std::unique_ptr<Node> old = std::move(decode_);
  decode_ = Node::Start(peers_, kDecode, options);
  ASSERT_NE(decode_->transfer->daemon_id(), old->transfer->daemon_id());
  const uint64_t before = decode_->HostUsed();

  const std::vector<BlockKey> keys = Keys("restart-b", 4);
  prefill_->PutChain(keys);
  absl::StatusOr<TransferOutcome> r = Push(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const absl::Status& b : r->blocks) {
    EXPECT_EQ(b.code(), absl::StatusCode::kUnavailable) << b;
    EXPECT_TRUE(absl::StrContains(b.message(), "restarted")) << b;
  }
  EXPECT_EQ(r->bytes_moved, 0u);
  // Nothing went to the new instance's arena through the stale connection,
  // its stage was committed empty (slots quarantined), and the old
  // instance got nothing either.
  decode_->ExpectHasExactly(keys, 0);
  old->ExpectHasExactly(keys, 0);
  EXPECT_EQ(decode_->transfer->pending(), 0u);
  EXPECT_GT(decode_->HostUsed(), before);
  decode_->transfer->ExpireStale();  // quarantine of 0: released now
  EXPECT_EQ(decode_->HostUsed(), before);

  // The next push says Hello again and lands whole.
  r = Push(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 4u) << r->blocks[LeadingOk(*r) % 4];
  decode_->ExpectHasExactly(keys, 4);
  std::vector<PeerStats> peers = prefill_->transfer->Peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].daemon_id, decode_->transfer->daemon_id());
  EXPECT_EQ(peers[0].connects, 2u);
  EXPECT_EQ(peers[0].transfers, 3u);
  EXPECT_EQ(peers[0].failed_transfers, 1u);
  EXPECT_TRUE(peers[0].connected);
}

TEST_F(PeerTransferTest, ARestartedSourceIsDetectedItsExportReleasedAndReachedAgain) {
  const std::vector<BlockKey> keys = Keys("restart-src", 3);
  prefill_->PutChain(keys);
  ASSERT_EQ(LeadingOk(*Pull({keys[0]})), 1u);

  std::unique_ptr<Node> old = std::move(prefill_);
  prefill_ = Node::Start(peers_, kPrefill, Options(PeerRole::kPrefill));
  prefill_->PutChain(keys);
  absl::StatusOr<TransferOutcome> r = Pull(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const absl::Status& b : r->blocks) {
    EXPECT_EQ(b.code(), absl::StatusCode::kUnavailable) << b;
    EXPECT_TRUE(absl::StrContains(b.message(), "restarted")) << b;
  }
  decode_->ExpectHasExactly(keys, 1);
  // The new source's pins were released at once, not at their ttl.
  EXPECT_EQ(prefill_->transfer->pending(), 0u);

  r = Pull(keys);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 3u);
  EXPECT_EQ(r->bytes_moved, 2 * kBlock);
  decode_->ExpectHasExactly(keys, 3);
  std::vector<PeerStats> peers = decode_->transfer->Peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].daemon_id, prefill_->transfer->daemon_id());
  EXPECT_EQ(peers[0].connects, 2u);
}

TEST_F(PeerTransferTest, AnExpiredStageIsFreedAndALateCommitIsRefused) {
  const uint64_t before = decode_->HostUsed();
  std::vector<PeerBlockInfo> blocks = {{Key("lapse-x"), BlockKey(), kBlock, 1, 0, false}};
  absl::StatusOr<StageResult> staged = decode_->transfer->Stage(ns_, blocks, absl::Seconds(1));
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_FALSE(staged->stage_id.empty());
  EXPECT_EQ(staged->daemon_id, decode_->transfer->daemon_id());
  ASSERT_EQ(staged->blocks.size(), 1u);
  EXPECT_NE(staged->blocks[0].address, 0u);
  EXPECT_EQ(decode_->transfer->pending(), 1u);
  EXPECT_EQ(decode_->HostUsed(), before + kBlock);

  // Not yet expired: an ExpireStale changes nothing.
  decode_->transfer->ExpireStale();
  EXPECT_EQ(decode_->transfer->pending(), 1u);

  absl::SleepFor(absl::Milliseconds(1100));
  decode_->transfer->ExpireStale();
  EXPECT_EQ(decode_->transfer->pending(), 0u);
  EXPECT_EQ(decode_->HostUsed(), before);
  absl::StatusOr<std::vector<absl::Status>> late = decode_->transfer->Commit(staged->stage_id, 1);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kNotFound) << late.status();
  EXPECT_EQ(decode_->Matched({Key("lapse-x")}), 0u);
}

TEST_F(PeerTransferTest, AnExpiredExportUnpinsAndALateReleaseIsRefused) {
  const std::vector<BlockKey> keys = Keys("lapse-export", 2);
  prefill_->PutChain(keys);
  absl::StatusOr<ExportResult> exported = prefill_->transfer->Export(ns_, keys, absl::Seconds(1));
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_EQ(exported->blocks.size(), 2u);
  EXPECT_EQ(exported->daemon_id, prefill_->transfer->daemon_id());
  EXPECT_EQ(prefill_->transfer->pending(), 1u);
  // Pinned for the peer: cannot be deleted now.
  EXPECT_EQ(prefill_->cache->Delete(ns_, {keys[1]}, false).status().code(),
            absl::StatusCode::kFailedPrecondition);

  absl::SleepFor(absl::Milliseconds(1100));
  prefill_->transfer->ExpireStale();
  EXPECT_EQ(prefill_->transfer->pending(), 0u);
  EXPECT_EQ(prefill_->transfer->ReleaseExport(exported->export_id).code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(prefill_->cache->Delete(ns_, {keys[1]}, false).ok());
}

TEST(PeerTransferLimitsTest, PendingStagesAndExportsAreCappedTogether) {
  InProcessPeers peers;
  PeerTransferOptions options = Options(PeerRole::kBoth);
  options.max_pending = 1;
  std::unique_ptr<Node> node = Node::Start(peers, "both:1", options);
  const std::vector<BlockKey> keys = Keys("cap", 1);
  node->PutChain(keys);
  std::vector<PeerBlockInfo> blocks = {{Key("cap-x"), BlockKey(), kBlock, 1, 0, false}};
  absl::StatusOr<StageResult> staged = node->transfer->Stage(node->ns, blocks, absl::Seconds(5));
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(node->transfer->Stage(node->ns, blocks, absl::Seconds(5)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(node->transfer->Export(node->ns, keys, absl::Seconds(5)).status().code(),
            absl::StatusCode::kResourceExhausted);
  // Committing nothing frees the place.
  absl::StatusOr<std::vector<absl::Status>> done = node->transfer->Commit(staged->stage_id, 0);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->size(), 1u);
  EXPECT_EQ((*done)[0].code(), absl::StatusCode::kUnavailable) << (*done)[0];
  absl::StatusOr<ExportResult> exported = node->transfer->Export(node->ns, keys, absl::Seconds(5));
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_TRUE(node->transfer->ReleaseExport(exported->export_id).ok());
  EXPECT_EQ(node->transfer->pending(), 0u);
}

TEST(PeerTransferLimitsTest, WithoutATransportEveryCallSaysWhy) {
  SystemClock clock;
  BlockCacheOptions o;
  o.host_bytes = 2ull << 20;
  o.slab_bytes = 1ull << 20;
  o.max_block_bytes = 1ull << 20;
  std::unique_ptr<BlockCache> cache = *BlockCache::Create(o, &clock);
  InProcessPeers peers;
  absl::StatusOr<std::unique_ptr<PeerTransfer>> t =
      PeerTransfer::Create(cache.get(), nullptr, "built without a transport", peers.factory(), {});
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<BlockKey> keys = Keys("none", 1);
  NamespaceId ns;
  absl::StatusOr<TransferOutcome> r = (*t)->Push(ns, keys, kDecode, absl::ZeroDuration());
  EXPECT_EQ(r.status(), absl::UnavailableError("built without a transport"));
  EXPECT_EQ((*t)->Hello("x").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE((*t)->Info().available);
  EXPECT_EQ((*t)->Info().detail, "built without a transport");
  EXPECT_TRUE((*t)->Peers().empty());
  EXPECT_EQ(peers.calls(), 0u);
}

}  // namespace
}  // namespace kvtier
