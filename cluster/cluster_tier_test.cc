// ClusterTier over three in-process daemons: caches and PeerTransfers over
// LoopbackTransport, routed by Memberships that share one FakeEtcd. A chain
// offered by a non-owner lands on its owner; a third node fills a Lookup
// miss from the owner byte-exact; a torn block on the owner is a miss; a
// dead owner costs a failure and then a back-off, never an error.
#include "cluster/cluster_tier.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cluster/testing/fake_etcd.h"
#include "testing/in_process_peer_channel.h"
#include "testing/keyed_chain.h"
#include "testing/loopback_transport.h"

namespace kvtier {
namespace {

constexpr uint64_t kBlock = 64 * 1024;

struct Node {
  std::string address;
  std::unique_ptr<BlockCache> cache;
  std::unique_ptr<PeerTransfer> transfer;
  std::unique_ptr<Membership> membership;
  std::unique_ptr<ClusterTier> tier;
  NamespaceId ns;

  void PutChain(const std::vector<BlockKey>& keys) {
    absl::Status s = PutKeyedChain(*cache, ns, keys, kBlock);
    ASSERT_TRUE(s.ok()) << s;
  }
  // The leading blocks of `keys` this node serves, each checked byte-exact.
  size_t ServesExactly(const std::vector<BlockKey>& keys) {
    const size_t n = cache->CachedPrefix(ns, keys);
    if (n == 0) return 0;
    absl::Status s = ReadsKeyedBytes(*cache, ns, absl::MakeConstSpan(keys).subspan(0, n), kBlock);
    EXPECT_TRUE(s.ok()) << s;
    return s.ok() ? n : 0;
  }
};

class ClusterTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* address : {"a:1", "b:1", "c:1"}) nodes_[address] = Start(address);
    Round();
  }
  std::unique_ptr<Node> Start(const std::string& address,
                              ClusterTierOptions options = ClusterTierOptions()) {
    auto n = std::make_unique<Node>();
    n->address = address;
    BlockCacheOptions o;
    o.host_bytes = 16ull << 20;
    o.slab_bytes = 1ull << 20;
    o.max_block_bytes = 1ull << 20;
    n->cache = *BlockCache::Create(o, &clock_);
    NamespaceSpec spec;
    spec.model_id = "cluster-model";
    spec.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};  // 64 KiB blocks
    n->ns = n->cache->OpenNamespace(spec)->id;
    PeerTransferOptions t;
    t.timeout = absl::Seconds(5);
    n->transfer = *PeerTransfer::Create(n->cache.get(), std::make_unique<LoopbackTransport>(),
                                        "unused", peers_.factory(), t);
    peers_.Place(address, n->transfer.get());
    MemberRecord self;
    self.node_id = address;
    self.daemon_id = n->transfer->daemon_id();
    n->membership = *Membership::Create(
        {.cluster = "t"}, std::make_unique<FakeEtcdClient>(&etcd_), self,
        [address] {
          MemberRecord r;
          r.address = address;
          r.role = "both";
          r.transport = true;
          return r;
        },
        &clock_);
    options.pull_timeout = absl::Seconds(5);
    n->tier = std::make_unique<ClusterTier>(std::move(options), n->cache.get(), n->transfer.get(),
                                            &clock_);
    n->tier->Attach(n->membership.get());
    return n;
  }
  void Round() {
    for (int i = 0; i < 2; ++i) {
      for (auto& [address, n] : nodes_) n->membership->Tick().IgnoreError();
    }
  }
  // A chain of `n` keys whose root the ring gives to `owner`, and, when
  // `then` is set, to `then` once `owner` has left.
  std::vector<BlockKey> ChainOwnedBy(const std::string& owner, int n,
                                     const std::string& then = "") {
    const RendezvousRing& ring = *nodes_["a:1"]->membership->Ring();
    std::vector<std::string> rest;
    for (const std::string& m : ring.members()) {
      if (m != owner) rest.push_back(m);
    }
    const RendezvousRing after(rest);
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const BlockKey root = *BlockKey::Create(absl::StrCat("root-", attempt));
      if (ring.OwnerIdOf(nodes_["a:1"]->ns, root) != owner) continue;
      if (!then.empty() && after.OwnerIdOf(nodes_["a:1"]->ns, root) != then) continue;
      std::vector<BlockKey> keys = {root};
      for (int i = 1; i < n; ++i) keys.push_back(*BlockKey::Create(absl::StrCat(attempt, "-", i)));
      return keys;
    }
    ADD_FAILURE() << "no root owned by " << owner;
    return {};
  }
  Node& N(const std::string& address) { return *nodes_[address]; }

  FakeClock clock_;
  FakeEtcd etcd_{&clock_};
  InProcessPeers peers_;
  std::map<std::string, std::unique_ptr<Node>> nodes_;
};

TEST_F(ClusterTierTest, AnOfferedChainLandsOnItsOwnerAndFillsAnotherNodeByteExact) {
  const std::vector<BlockKey> chain = ChainOwnedBy("c:1", 6);
  N("a:1").PutChain(chain);
  N("a:1").tier->Offer(N("a:1").ns, chain.back());
  N("a:1").tier->DrainOffersForTesting();
  EXPECT_EQ(N("c:1").ServesExactly(chain), 6u);
  EXPECT_EQ(N("a:1").tier->Stats().offers, 1u);
  EXPECT_EQ(N("a:1").tier->Stats().offered_blocks, 6u);

  EXPECT_EQ(N("b:1").ServesExactly(chain), 0u);
  EXPECT_EQ(N("b:1").tier->Fill(N("b:1").ns, chain, /*judged=*/true), 6u);
  EXPECT_EQ(N("b:1").ServesExactly(chain), 6u);
  const ClusterTierStats stats = N("b:1").tier->Stats();
  EXPECT_EQ(stats.fills, 1u);
  EXPECT_EQ(stats.pulled_blocks, 6u);
  EXPECT_EQ(stats.pulled_bytes, 6 * kBlock);
  // Everything is local now: no second call to the owner.
  const uint64_t calls = peers_.calls();
  EXPECT_EQ(N("b:1").tier->Fill(N("b:1").ns, chain, true), 0u);
  EXPECT_EQ(peers_.calls(), calls);
}

TEST_F(ClusterTierTest, OnlyTheMissingSuffixIsPulled) {
  const std::vector<BlockKey> chain = ChainOwnedBy("c:1", 5);
  N("c:1").PutChain(chain);
  N("b:1").PutChain({chain[0], chain[1]});
  EXPECT_EQ(N("b:1").tier->Fill(N("b:1").ns, chain, false), 3u);
  EXPECT_EQ(N("b:1").tier->Stats().pulled_bytes, 3 * kBlock);
  EXPECT_EQ(N("b:1").ServesExactly(chain), 5u);
}

TEST_F(ClusterTierTest, TheOwnerItselfAndAChainItOwnsAskNobody) {
  const std::vector<BlockKey> chain = ChainOwnedBy("b:1", 3);
  const uint64_t calls = peers_.calls();
  EXPECT_EQ(N("b:1").tier->Fill(N("b:1").ns, chain, false), 0u);
  N("b:1").PutChain(chain);
  N("b:1").tier->Offer(N("b:1").ns, chain.back());
  N("b:1").tier->DrainOffersForTesting();
  EXPECT_EQ(peers_.calls(), calls);
  EXPECT_EQ(N("b:1").tier->Stats().offers, 0u);
}

TEST_F(ClusterTierTest, ATornBlockOnTheOwnerIsAMissNotWrongBytes) {
  const std::vector<BlockKey> chain = ChainOwnedBy("c:1", 4);
  N("c:1").PutChain(chain);
  auto bytes = N("c:1").cache->MutableBytesForTesting(N("c:1").ns, chain[2]);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[100] ^= 0xff;
  EXPECT_EQ(N("b:1").tier->Fill(N("b:1").ns, chain, false), 2u);
  EXPECT_EQ(N("b:1").ServesExactly(chain), 2u);  // the verified prefix only
}

TEST_F(ClusterTierTest, TheJudgeCanDeclineAPull) {
  ClusterTierOptions never;
  uint32_t asked_first = 99, asked_blocks = 0;
  uint64_t asked_bytes = 0;
  never.judge = [&](const NamespaceId&, uint32_t first, uint32_t blocks, uint64_t bytes, double) {
    asked_first = first;
    asked_blocks = blocks;
    asked_bytes = bytes;
    return false;
  };
  nodes_["d:1"] = Start("d:1", std::move(never));
  Round();
  const std::vector<BlockKey> chain = ChainOwnedBy("c:1", 4);
  N("c:1").PutChain(chain);
  EXPECT_EQ(N("d:1").tier->Fill(N("d:1").ns, chain, /*judged=*/true), 0u);
  EXPECT_EQ(asked_first, 0u);
  EXPECT_EQ(asked_blocks, 4u);
  EXPECT_EQ(asked_bytes, 4 * kBlock);
  EXPECT_EQ(N("d:1").tier->Stats().pulls_declined, 1u);
  // A Get is not judged: the caller asked for the bytes.
  EXPECT_EQ(N("d:1").tier->Fill(N("d:1").ns, chain, /*judged=*/false), 4u);
}

TEST_F(ClusterTierTest, ADeadOwnerFailsOnceThenIsBackedOffThenItsChainsMove) {
  const std::vector<BlockKey> chain = ChainOwnedBy("c:1", 3, /*then=*/"a:1");
  N("a:1").PutChain(chain);
  peers_.Remove("c:1");  // c's daemon is gone; its lease not yet expired
  EXPECT_EQ(N("b:1").tier->Fill(N("b:1").ns, chain, false), 0u);
  EXPECT_EQ(N("b:1").tier->Stats().pull_failures, 1u);
  EXPECT_EQ(N("b:1").tier->Fill(N("b:1").ns, chain, false), 0u);
  EXPECT_EQ(N("b:1").tier->Stats().pulls_backed_off, 1u);
  // c leaves the ring; its chains now belong to a or b.
  N("c:1").membership->Leave();
  Round();
  EXPECT_EQ(N("b:1").membership->Ring()->OwnerIdOf(N("b:1").ns, chain[0]), "a:1");
  EXPECT_EQ(N("b:1").tier->Fill(N("b:1").ns, chain, false), 3u);
  EXPECT_EQ(N("b:1").ServesExactly(chain), 3u);
}

TEST_F(ClusterTierTest, AnOfferToADeadOwnerIsAFailureAndBacksOff) {
  const std::vector<BlockKey> chain = ChainOwnedBy("c:1", 3);
  N("a:1").PutChain(chain);
  peers_.Remove("c:1");
  N("a:1").tier->Offer(N("a:1").ns, chain.back());
  N("a:1").tier->DrainOffersForTesting();
  EXPECT_EQ(N("a:1").tier->Stats().offer_failures, 1u);
  EXPECT_EQ(N("a:1").tier->Stats().offers, 0u);
  // Backing off: a pull from it is not even tried.
  EXPECT_EQ(N("a:1").tier->Fill(N("a:1").ns, {chain[0], *BlockKey::Create("x")}, false), 0u);
  EXPECT_EQ(N("a:1").tier->Stats().pulls_backed_off, 1u);
}

TEST_F(ClusterTierTest, AFillLeavesTheCallerHalfItsRemainingTime) {
  const std::vector<BlockKey> chain = ChainOwnedBy("c:1", 3);
  N("c:1").PutChain(chain);
  // A caller with 4 ms left is not made to wait at all.
  EXPECT_EQ(N("b:1").tier->Fill(N("b:1").ns, chain, false, clock_.Now() + absl::Milliseconds(4)),
            0u);
  EXPECT_EQ(N("b:1").tier->Stats().fills, 0u);
  EXPECT_EQ(N("b:1").tier->Fill(N("b:1").ns, chain, false, clock_.Now() + absl::Seconds(10)), 3u);
}

TEST_F(ClusterTierTest, AFullOfferQueueDropsAndCounts) {
  ClusterTierOptions none;
  none.max_queued_offers = 0;
  nodes_["d:1"] = Start("d:1", std::move(none));
  Round();
  const std::vector<BlockKey> chain = ChainOwnedBy("c:1", 2);
  N("d:1").PutChain(chain);
  N("d:1").tier->Offer(N("d:1").ns, chain.back());
  EXPECT_EQ(N("d:1").tier->Stats().offers_dropped, 1u);
}

}  // namespace
}  // namespace kvtier
