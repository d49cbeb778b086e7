// Prefill-to-decode transfer between two real daemons over UCX on loopback:
// push and pull, byte-exact decode-side Lookup and Get, roles, bad input,
// injected link faults (failed and torn operations), an unreachable peer, and
// peers that authenticate. peer_transfer_restart_rpc_test.cc stops and kills
// a peer mid-transfer.
#include "tests/integration/peer_transfer_rpc_fixture.h"

namespace kvtier {
namespace {

using client::Client;
using client::TransferDirection;

TEST_F(PeerTransferRpcTest, PushLandsEveryBlockByteExactOnTheDecodeSide) {
  const std::vector<std::string> keys = NumberedKeys("push", 12);
  PutChain(*pc_, std::vector<std::string>(keys.begin(), keys.begin() + 10));
  ExpectDecodeHasExactly(keys, 0);

  auto r = pc_->Transfer(ns_, keys, decode_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->blocks.size(), 12u);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(r->blocks[i].status.ok()) << r->blocks[i].status;
  EXPECT_EQ(r->blocks[10].status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r->blocks[11].status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r->bytes_moved, 10 * kBlock);
  EXPECT_EQ(r->lanes, "tcp/lo");
  ExpectDecodeHasExactly(keys, 10);

  // The decode engine's path: Lookup with a lease, then Load into its
  // shared-memory region; every block arrives verified and byte-exact.
  {
    auto region = client::SharedRegion::Create(10 * kBlock);
    ASSERT_TRUE(region.ok()) << region.status();
    auto region_id = dc_->RegisterMemory((*region)->path(), (*region)->size());
    ASSERT_TRUE(region_id.ok()) << region_id.status();
    client::LookupOptions lease;
    lease.take_lease = true;
    auto hit = dc_->Lookup(ns_, keys, lease);
    ASSERT_TRUE(hit.ok()) << hit.status();
    ASSERT_EQ(hit->matched, 10u);
    std::vector<client::RegionBlockRef> refs;
    for (int i = 0; i < 10; ++i) refs.push_back({keys[i], "", i * kBlock, kBlock, {}});
    int loaded = 0;
    ASSERT_TRUE(dc_->Load(ns_, *region_id, refs,
                          [&](const client::BlockCompletion& c) {
                            EXPECT_TRUE(c.status.ok()) << c.status;
                            loaded += c.status.ok();
                          })
                    .ok());
    EXPECT_EQ(loaded, 10);
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(0, std::memcmp((*region)->data() + i * kBlock,
                               DeterministicString(ns_ + keys[i], kBlock).data(), kBlock))
          << i;
    }
    EXPECT_TRUE(dc_->Release(hit->lease_id).ok());
    EXPECT_TRUE(dc_->UnregisterMemory(*region_id).ok());
  }

  // A second push moves nothing: the receiver has every block.
  r = pc_->Transfer(ns_, keys, decode_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(LeadingOk(*r), 10u);
  EXPECT_EQ(r->bytes_moved, 0u);

  v1::ListPeersResponse peers = Peers(*prefill_);
  ASSERT_EQ(peers.peers_size(), 1);
  const v1::PeerStatus& p = peers.peers(0);
  EXPECT_EQ(p.address(), decode_->listen_address());
  EXPECT_EQ(p.role(), "decode");
  EXPECT_TRUE(p.connected());
  EXPECT_EQ(p.lanes(), "tcp/lo");
  EXPECT_EQ(p.bytes_sent(), 10 * kBlock);
  EXPECT_EQ(p.blocks_sent(), 20u);  // 10 sent + 10 already there
  EXPECT_EQ(p.transfers(), 2u);
  EXPECT_EQ(p.failed_transfers(), 0u);
  EXPECT_GT(p.observed_bytes_per_second(), 0);
  EXPECT_EQ(p.connects(), 1u);
}

TEST_F(PeerTransferRpcTest, PullFetchesTheCachedPrefixOnly) {
  const std::vector<std::string> keys = NumberedKeys("pull", 8);
  PutChain(*pc_, std::vector<std::string>(keys.begin(), keys.begin() + 5));
  auto r = dc_->Transfer(ns_, keys, prefill_->listen_address(), TransferDirection::kPull);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 5u);
  for (int i = 5; i < 8; ++i) EXPECT_EQ(r->blocks[i].status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r->bytes_moved, 5 * kBlock);
  ExpectDecodeHasExactly(keys, 5);
  // The source's pins went back with ReleaseExport: it can delete them.
  EXPECT_EQ(prefill_->peer_transfer().pending(), 0u);
  EXPECT_TRUE(pc_->Delete(ns_, {keys[4]}, false).ok());
  v1::ListPeersResponse peers = Peers(*decode_);
  ASSERT_EQ(peers.peers_size(), 1);
  EXPECT_EQ(peers.peers(0).bytes_received(), 5 * kBlock);
  EXPECT_EQ(peers.peers(0).role(), "prefill");
}

TEST_F(PeerTransferRpcTest, RolesAndBadInputAreRefusedAndChangeNothing) {
  const std::vector<std::string> keys = NumberedKeys("bad", 3);
  PutChain(*pc_, keys);
  PutChain(*dc_, {"decode-own"});
  // A decode daemon does not send; a prefill daemon does not receive.
  auto r = dc_->Transfer(ns_, {"decode-own"}, prefill_->listen_address(), TransferDirection::kPush);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  r = pc_->Transfer(ns_, keys, decode_->listen_address(), TransferDirection::kPull);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  // Pushing to another prefill daemon: refused per block by the receiver.
  r = pc_->Transfer(ns_, keys, prefill_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& b : r->blocks) EXPECT_EQ(b.status.code(), absl::StatusCode::kFailedPrecondition);

  EXPECT_EQ(pc_->Transfer("00000000000000000000000000000000", keys, decode_->listen_address(),
                          TransferDirection::kPush)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(
      pc_->Transfer(ns_, {}, decode_->listen_address(), TransferDirection::kPush).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pc_->Transfer(ns_, keys, "", TransferDirection::kPush).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pc_->Transfer(ns_, {std::string(40, 'k')}, decode_->listen_address(),
                          TransferDirection::kPush)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);

  // A namespace the decode side has not opened: every block refused there.
  auto other = pc_->OpenNamespace(Spec(16));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(pc_->Put(other->id, {"o"}, {DeterministicString("o", 32 * 1024)}).ok());
  r = pc_->Transfer(other->id, {"o"}, decode_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->blocks[0].status.code(), absl::StatusCode::kNotFound) << r->blocks[0].status;

  // Nothing of the refused transfers landed anywhere.
  ExpectDecodeHasExactly(keys, 0);
  EXPECT_EQ(decode_->peer_transfer().pending(), 0u);
  EXPECT_EQ(prefill_->peer_transfer().pending(), 0u);
}

TEST_F(PeerTransferRpcTest, FailedAndTornOperationsNeverLandAndTheLinkRecovers) {
  const std::vector<std::string> keys = NumberedKeys("fault", 10);
  PutChain(*pc_, keys);
  // The link dies after 4 block operations: blocks 0..3 land, 4 fails with
  // the transport's error, the rest are aborted (their parent is missing).
  faults_->SetPlan({.fail_after_ops = 4});
  auto r = pc_->Transfer(ns_, keys, decode_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 4u);
  EXPECT_EQ(r->blocks[4].status.code(), absl::StatusCode::kUnavailable) << r->blocks[4].status;
  for (int i = 5; i < 10; ++i) EXPECT_EQ(r->blocks[i].status.code(), absl::StatusCode::kAborted);
  ExpectDecodeHasExactly(keys, 4);

  // Every operation torn (half the bytes, reported OK): the receiver's
  // checksum refuses the first block sent; nothing more lands.
  faults_->SetPlan({.torn = 1.0});
  r = pc_->Transfer(ns_, keys, decode_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 4u);
  EXPECT_EQ(r->blocks[4].status.code(), absl::StatusCode::kDataLoss) << r->blocks[4].status;
  ExpectDecodeHasExactly(keys, 4);
  // The source's own copy was fine: it still serves it.
  EXPECT_EQ(Matched(*pc_, keys), 10u);

  // Faults stop: the rest goes through.
  faults_->SetPlan({});
  r = pc_->Transfer(ns_, keys, decode_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 10u);
  EXPECT_EQ(r->bytes_moved, 6 * kBlock);
  ExpectDecodeHasExactly(keys, 10);
  EXPECT_EQ(Peers(*prefill_).peers(0).failed_transfers(), 2u);
}

// A peer that stages or exports and never finishes: the slots and pins it
// holds are let go after their ttl.
TEST_F(PeerTransferRpcTest, AbandonedStagesAndExportsLapse) {
  const std::vector<std::string> keys = NumberedKeys("lapse", 2);
  PutChain(*pc_, keys);
  auto ns = NamespaceId::FromHex(ns_);
  ASSERT_TRUE(ns.ok());
  const CacheSnapshot before = decode_->cache().Snapshot();
  std::vector<PeerBlockInfo> blocks = {
      {*BlockKey::Create("lapse-x"), BlockKey(), kBlock, 1, 0, false}};
  auto staged = decode_->peer_transfer().Stage(*ns, blocks, absl::Seconds(1));
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_FALSE(staged->stage_id.empty());
  EXPECT_GT(decode_->cache().Snapshot().host.used_bytes, before.host.used_bytes);

  std::vector<BlockKey> bkeys = {*BlockKey::Create(keys[0]), *BlockKey::Create(keys[1])};
  auto exported = prefill_->peer_transfer().Export(*ns, bkeys, absl::Seconds(1));
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_EQ(exported->blocks.size(), 2u);
  // Pinned for the peer: cannot be deleted now.
  EXPECT_EQ(pc_->Delete(ns_, {keys[1]}, false).status().code(),
            absl::StatusCode::kFailedPrecondition);

  absl::SleepFor(absl::Milliseconds(1100));
  decode_->peer_transfer().ExpireStale();
  prefill_->peer_transfer().ExpireStale();
  EXPECT_EQ(decode_->peer_transfer().pending(), 0u);
  EXPECT_EQ(prefill_->peer_transfer().pending(), 0u);
  EXPECT_EQ(decode_->cache().Snapshot().host.used_bytes, before.host.used_bytes);
  EXPECT_EQ(decode_->peer_transfer().Commit(staged->stage_id, 1).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(prefill_->peer_transfer().ReleaseExport(exported->export_id).code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(pc_->Delete(ns_, {keys[1]}, false).ok());
}

TEST_F(PeerTransferRpcTest, AnUnreachablePeerFailsEveryBlockQuickly) {
  const std::vector<std::string> keys = NumberedKeys("nowhere", 3);
  PutChain(*pc_, keys);
  const std::string nowhere = absl::StrCat("127.0.0.1:", FreePort());
  const absl::Time start = absl::Now();
  auto r = pc_->Transfer(ns_, keys, nowhere, TransferDirection::kPush, absl::Seconds(2));
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& b : r->blocks) {
    EXPECT_TRUE(b.status.code() == absl::StatusCode::kUnavailable ||
                b.status.code() == absl::StatusCode::kDeadlineExceeded)
        << b.status;
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(Matched(*pc_, keys), 3u);  // still serving
}

// With authentication on both daemons: the engines are tenant "alpha" (same
// namespace id on both sides), the prefill daemon presents its peer token to
// the decode daemon, and the push lands. A prefill daemon without the token
// is refused by the decode daemon's Peer service (UNAUTHENTICATED), and
// nothing lands.
TEST(AuthenticatedPeerTransferTest, PeersPresentTheirTokenAndTenantsKeepTheirNamespace) {
  setenv("UCX_NET_DEVICES", "lo", 1);
  setenv("UCX_TLS", "tcp", 1);
  const std::string dir = absl::StrCat(::testing::TempDir(), "kvtier-peer-auth-", getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  const std::string identities = dir + "/identities.yaml";
  {
    std::ofstream out(identities);
    out << "identities:\n"
        << "  - {name: engine, token: alpha-token-0123456789, tenant: alpha}\n"
        << "  - {name: prefill-daemon, token: peer-token-0123456789, role: peer}\n";
  }
  ASSERT_EQ(chmod(identities.c_str(), 0600), 0);
  {
    std::ofstream out(dir + "/peer.token");
    out << "peer-token-0123456789\n";
  }
  auto start = [&](const std::string& role, const std::string& token_for) {
    DaemonConfig c = PeerDaemonConfig(role);
    c.identities_file = identities;
    if (!token_for.empty()) {
      c.peer_token_file = dir + "/peer.token";
      c.peer_allowed = token_for;
    }
    auto d = Daemon::Start(c);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  };
  std::unique_ptr<Daemon> decode = start("decode", "");
  ASSERT_TRUE(decode != nullptr);
  std::unique_ptr<Daemon> prefill = start("prefill", decode->listen_address());
  std::unique_ptr<Daemon> bare = start("prefill", "");
  ASSERT_TRUE(prefill && bare);
  // A token without the list of peers it may go to is a configuration error.
  {
    DaemonConfig c = PeerDaemonConfig("prefill");
    c.peer_token_file = dir + "/peer.token";
    EXPECT_EQ(Daemon::Start(c).status().code(), absl::StatusCode::kInvalidArgument);
  }
  client::ClientOptions engine;
  engine.credentials.token = "alpha-token-0123456789";
  auto pc = *Client::Connect(prefill->listen_address(), engine);
  auto bc = *Client::Connect(bare->listen_address(), engine);
  auto dc = *Client::Connect(decode->listen_address(), engine);
  auto ns = pc->OpenNamespace(Spec());
  ASSERT_TRUE(ns.ok()) << ns.status();
  ASSERT_EQ(dc->OpenNamespace(Spec())->id, ns->id);
  ASSERT_EQ(bc->OpenNamespace(Spec())->id, ns->id);
  const std::vector<std::string> keys = NumberedKeys("auth", 3);
  std::vector<std::string> data;
  for (const std::string& k : keys) data.push_back(DeterministicString(k, kBlock));
  ASSERT_TRUE(pc->Put(ns->id, keys, data).ok());
  ASSERT_TRUE(bc->Put(ns->id, keys, data).ok());

  auto refused = bc->Transfer(ns->id, keys, decode->listen_address(), TransferDirection::kPush);
  const bool refused_whole =
      !refused.ok() && refused.status().code() == absl::StatusCode::kUnauthenticated;
  bool refused_each = refused.ok();
  if (refused.ok()) {
    ASSERT_EQ(refused->blocks.size(), keys.size());
    for (const auto& b : refused->blocks) {
      refused_each = refused_each && b.status.code() == absl::StatusCode::kUnauthenticated;
    }
  }
  EXPECT_TRUE(refused_whole || refused_each)
      << (refused.ok() ? refused->blocks[0].status : refused.status());
  EXPECT_EQ(dc->Lookup(ns->id, keys)->matched, 0u);

  // An engine cannot make the daemon send its token anywhere else: an
  // address outside peer.allowed is refused before any connection.
  const std::string elsewhere = absl::StrCat("127.0.0.1:", FreePort());
  EXPECT_EQ(pc->Transfer(ns->id, keys, elsewhere, TransferDirection::kPush).status().code(),
            absl::StatusCode::kPermissionDenied);

  auto pushed = pc->Transfer(ns->id, keys, decode->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  for (const auto& b : pushed->blocks) EXPECT_TRUE(b.status.ok()) << b.status;
  EXPECT_EQ(*dc->Get(ns->id, keys), data);
  ASSERT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

}  // namespace
}  // namespace kvtier
