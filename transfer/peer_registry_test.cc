// PeerRegistry on its own, over LoopbackTransport and a PeerChannel that
// answers Hello only: connecting once and reusing the connection, a peer
// that does not answer, a broken connection re-made, a restarted peer
// detected and reconnected, and the counters.
#include "transfer/peer_registry.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "testing/loopback_transport.h"

namespace kvtier {
namespace {

// Answers Hello as the daemon `id` whose transport is `remote`; the other
// calls are not used by the registry.
class HelloChannel final : public PeerChannel {
 public:
  struct State {
    std::string daemon_id = "first";
    absl::Status fail;  // Hello's answer when not OK
    int hellos = 0;
    std::string last_caller;
    std::string address;
    ExposedMemory memory;
  };
  explicit HelloChannel(State* state) : state_(state) {}

  absl::StatusOr<PeerHello> Hello(const std::string& caller_id, absl::Time) override {
    ++state_->hellos;
    state_->last_caller = caller_id;
    if (!state_->fail.ok()) return state_->fail;
    PeerHello h;
    h.daemon_id = state_->daemon_id;
    h.role = "decode";
    h.transport_address = state_->address;
    h.memory = state_->memory;
    return h;
  }
  absl::StatusOr<StageResult> Stage(const NamespaceId&, absl::Span<const PeerBlockInfo>,
                                    absl::Duration, absl::Time) override {
    return absl::UnimplementedError("hello only");
  }
  absl::StatusOr<std::vector<absl::Status>> Commit(const std::string&, uint32_t,
                                                   absl::Time) override {
    return absl::UnimplementedError("hello only");
  }
  absl::StatusOr<ExportResult> Export(const NamespaceId&, absl::Span<const BlockKey>,
                                      absl::Duration, absl::Time) override {
    return absl::UnimplementedError("hello only");
  }
  absl::Status ReleaseExport(const std::string&, absl::Time) override {
    return absl::UnimplementedError("hello only");
  }

 private:
  State* const state_;
};

class PeerRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_.address = remote_.LocalAddress();
    state_.memory = *remote_.Expose(absl::MakeSpan(arena_));
  }
  PeerChannelFactory Factory() {
    return [this](const std::string& target) -> std::unique_ptr<PeerChannel> {
      targets_.push_back(target);
      return std::make_unique<HelloChannel>(&state_);
    };
  }
  absl::Time Deadline() { return absl::Now() + absl::Seconds(5); }

  std::vector<uint8_t> arena_ = std::vector<uint8_t>(4096);
  LoopbackTransport remote_;
  LoopbackTransport local_;
  HelloChannel::State state_;
  std::vector<std::string> targets_;
};

TEST_F(PeerRegistryTest, ConnectsOnceAndReusesTheConnection) {
  PeerRegistry registry(&local_, Factory(), "me");
  absl::StatusOr<PeerLink> a = registry.Connected("peer:1", Deadline());
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<PeerLink> b = registry.Connected("peer:1", Deadline());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->connection, b->connection);
  EXPECT_EQ(a->peer, b->peer);
  EXPECT_EQ(a->daemon_id, "first");
  EXPECT_EQ(a->peer->target, "peer:1");
  EXPECT_EQ(state_.hellos, 1);
  EXPECT_EQ(state_.last_caller, "me");
  EXPECT_EQ(targets_, std::vector<std::string>{"peer:1"});
  EXPECT_TRUE(local_.Describe(a->connection).connected);

  std::vector<PeerStats> peers = registry.Peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].address, "peer:1");
  EXPECT_EQ(peers[0].daemon_id, "first");
  EXPECT_EQ(peers[0].role, "decode");
  EXPECT_EQ(peers[0].lanes, "loopback");
  EXPECT_TRUE(peers[0].connected);
  EXPECT_EQ(peers[0].connects, 1u);
  EXPECT_EQ(peers[0].transfers, 0u);
}

TEST_F(PeerRegistryTest, APeerThatDoesNotAnswerHelloIsReportedAndRetried) {
  PeerRegistry registry(&local_, Factory(), "me");
  state_.fail = absl::UnavailableError("connection refused");
  absl::StatusOr<PeerLink> a = registry.Connected("peer:2", Deadline());
  ASSERT_EQ(a.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(a.status().message(), "peer peer:2 did not answer Hello: connection refused");
  std::vector<PeerStats> peers = registry.Peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_FALSE(peers[0].connected);
  EXPECT_EQ(peers[0].connects, 0u);
  EXPECT_EQ(peers[0].last_error, "peer peer:2 did not answer Hello: connection refused");

  state_.fail = absl::OkStatus();
  ASSERT_TRUE(registry.Connected("peer:2", Deadline()).ok());
  EXPECT_EQ(state_.hellos, 2);
  EXPECT_EQ(registry.Peers()[0].connects, 1u);
  EXPECT_EQ(targets_.size(), 1u);  // one channel per peer, kept
}

TEST_F(PeerRegistryTest, AnAddressTheTransportCannotReachIsReported) {
  PeerRegistry registry(&local_, Factory(), "me");
  state_.address = "not-loopback";
  absl::StatusOr<PeerLink> a = registry.Connected("peer:3", Deadline());
  ASSERT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(a.status().message(), "connecting to peer peer:3: ")) << a.status();
}

TEST_F(PeerRegistryTest, ABrokenConnectionIsRemadeWithHello) {
  PeerRegistry registry(&local_, Factory(), "me");
  absl::StatusOr<PeerLink> a = registry.Connected("peer:1", Deadline());
  ASSERT_TRUE(a.ok()) << a.status();
  local_.Disconnect(a->connection);  // the transport saw the link die
  EXPECT_FALSE(registry.Peers()[0].connected);
  absl::StatusOr<PeerLink> b = registry.Connected("peer:1", Deadline());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(b->connection, a->connection);
  EXPECT_EQ(state_.hellos, 2);
  EXPECT_EQ(registry.Peers()[0].connects, 2u);
  EXPECT_TRUE(registry.Peers()[0].connected);
}

TEST_F(PeerRegistryTest, ARestartedPeerIsDetectedItsConnectionDroppedAndReconnected) {
  PeerRegistry registry(&local_, Factory(), "me");
  absl::StatusOr<PeerLink> a = registry.Connected("peer:1", Deadline());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(registry.CheckSameInstance(*a, "first").ok());
  EXPECT_TRUE(local_.Describe(a->connection).connected);

  state_.daemon_id = "second";  // the peer restarted
  const absl::Status restarted = registry.CheckSameInstance(*a, "second");
  EXPECT_EQ(restarted.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(restarted.message(),
            "peer peer:1 restarted during the transfer (now daemon second, connected to first); "
            "retry");
  EXPECT_FALSE(local_.Describe(a->connection).connected);
  EXPECT_EQ(registry.Peers()[0].last_error, restarted.message());

  absl::StatusOr<PeerLink> b = registry.Connected("peer:1", Deadline());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->daemon_id, "second");
  EXPECT_NE(b->connection, a->connection);
  EXPECT_EQ(registry.Peers()[0].daemon_id, "second");
  EXPECT_EQ(registry.Peers()[0].connects, 2u);
  // A stale link checked again does not drop the new connection.
  EXPECT_FALSE(registry.CheckSameInstance(*a, "second").ok());
  EXPECT_TRUE(local_.Describe(b->connection).connected);
}

TEST_F(PeerRegistryTest, RecordCountsEachDirectionAndFailures) {
  PeerRegistry registry(&local_, Factory(), "me");
  absl::StatusOr<PeerLink> a = registry.Connected("peer:1", Deadline());
  ASSERT_TRUE(a.ok()) << a.status();
  TransferOutcome sent;
  sent.bytes_moved = 100;
  sent.transport_seconds = 0.5;
  sent.lanes = "tcp/lo";
  registry.Record(*a->peer, true, sent, 3, absl::OkStatus());
  TransferOutcome got;
  got.bytes_moved = 40;
  got.transport_seconds = 0.25;
  registry.Record(*a->peer, false, got, 1, absl::DataLossError("bad bytes"));
  std::vector<PeerStats> peers = registry.Peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].transfers, 2u);
  EXPECT_EQ(peers[0].failed_transfers, 1u);
  EXPECT_EQ(peers[0].bytes_sent, 100u);
  EXPECT_EQ(peers[0].bytes_received, 40u);
  EXPECT_EQ(peers[0].blocks_sent, 3u);
  EXPECT_EQ(peers[0].blocks_received, 1u);
  EXPECT_DOUBLE_EQ(peers[0].transport_seconds, 0.75);
  EXPECT_EQ(peers[0].last_error, "bad bytes");
  // The live connection's lanes win over the last transfer's.
  EXPECT_EQ(peers[0].lanes, "loopback");
}

}  // namespace
}  // namespace kvtier
