#include "transfer/ucx/ucx_transport.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <vector>

#include "transfer/transport_factory.h"

namespace kvtier {
namespace {

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 131 + (i >> 9));
  return v;
}

// Two transports in one process, as two daemons would be, over the UCX
// transports named by the test parameter (UCX_TLS), on loopback only.
struct Setting {
  const char* tls;
  const char* lane;  // the transport the endpoint must use
};

class UcxTransportTest : public ::testing::TestWithParam<Setting> {
 protected:
  void SetUp() override {
    setenv("UCX_NET_DEVICES", "lo", 1);
    setenv("UCX_TLS", GetParam().tls, 1);
    auto a = UcxTransport::Create();
    ASSERT_TRUE(a.ok()) << a.status();
    auto b = UcxTransport::Create();
    ASSERT_TRUE(b.ok()) << b.status();
    a_ = std::move(*a);
    b_ = std::move(*b);
    a_mem_ = Pattern(kBytes, 1);
    b_mem_.assign(kBytes, 0);
    auto ea = a_->Expose(absl::MakeSpan(a_mem_));
    ASSERT_TRUE(ea.ok()) << ea.status();
    auto eb = b_->Expose(absl::MakeSpan(b_mem_));
    ASSERT_TRUE(eb.ok()) << eb.status();
    a_exposed_ = *ea;
    b_exposed_ = *eb;
  }

  static constexpr size_t kBytes = 4 << 20;
  std::unique_ptr<UcxTransport> a_, b_;
  std::vector<uint8_t> a_mem_, b_mem_;
  ExposedMemory a_exposed_, b_exposed_;
};

TEST_P(UcxTransportTest, PutAndGetMoveExactBytesWithPerOpStatus) {
  EXPECT_EQ(a_->Capabilities().name, "ucx");
  EXPECT_EQ(a_->Capabilities().transports, GetParam().tls);
  EXPECT_TRUE(a_->Capabilities().detects_peer_failure);
  absl::StatusOr<uint64_t> conn = a_->Connect(b_->LocalAddress(), b_exposed_);
  ASSERT_TRUE(conn.ok()) << conn.status();

  // Put three blocks of A's memory into B at scattered offsets.
  const uint64_t base = b_exposed_.base;
  std::vector<RmaOp> puts = {{a_mem_.data(), base + 3 * 65536, 256 * 1024},
                             {a_mem_.data() + 1000000, base + 1, 70001},
                             {a_mem_.data() + 2000000, base + kBytes - 5, 5}};
  std::vector<absl::Status> st =
      a_->Execute(*conn, RmaKind::kPut, puts, absl::Now() + absl::Seconds(20));
  ASSERT_EQ(st.size(), 3u);
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
  for (const RmaOp& op : puts) {
    EXPECT_EQ(0, std::memcmp(b_mem_.data() + (op.remote_address - base), op.local, op.bytes));
  }

  // Get them back into a fresh local buffer.
  std::vector<uint8_t> back(kBytes, 0xee);
  std::vector<RmaOp> gets = {{back.data(), base + 3 * 65536, 256 * 1024},
                             {back.data() + 300000, base + 1, 70001}};
  st = a_->Execute(*conn, RmaKind::kGet, gets, absl::Now() + absl::Seconds(20));
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(0, std::memcmp(back.data(), a_mem_.data(), 256 * 1024));
  EXPECT_EQ(0, std::memcmp(back.data() + 300000, a_mem_.data() + 1000000, 70001));

  ConnectionInfo info = a_->Describe(*conn);
  EXPECT_TRUE(info.connected);
  EXPECT_NE(info.lanes.find(GetParam().lane), std::string::npos) << info.lanes;
  a_->Disconnect(*conn);
  EXPECT_FALSE(a_->Describe(*conn).connected);
}

TEST_P(UcxTransportTest, RangesOutsideThePeersMemoryAreRefusedAndNotIssued) {
  absl::StatusOr<uint64_t> conn = a_->Connect(b_->LocalAddress(), b_exposed_);
  ASSERT_TRUE(conn.ok()) << conn.status();
  const uint64_t base = b_exposed_.base;
  std::vector<RmaOp> ops = {{a_mem_.data(), base - 1, 16},
                            {a_mem_.data(), base + kBytes - 8, 16},
                            {a_mem_.data(), base + 8, ~uint64_t{0} - 4},
                            {a_mem_.data(), base, 16}};
  std::vector<absl::Status> st =
      a_->Execute(*conn, RmaKind::kPut, ops, absl::Now() + absl::Seconds(20));
  EXPECT_EQ(st[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st[1].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st[2].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(st[3].ok()) << st[3];
  EXPECT_EQ(0, std::memcmp(b_mem_.data(), a_mem_.data(), 16));
  EXPECT_EQ(b_mem_[kBytes - 1], 0);  // the refused op wrote nothing
}

TEST_P(UcxTransportTest, BadPeerDescriptionsAreRefused) {
  ExposedMemory none = b_exposed_;
  none.remote_key.clear();
  EXPECT_EQ(a_->Connect(b_->LocalAddress(), none).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a_->Connect("", b_exposed_).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<RmaOp> ops = {{a_mem_.data(), b_exposed_.base, 16}};
  std::vector<absl::Status> st =
      a_->Execute(12345, RmaKind::kPut, ops, absl::Now() + absl::Seconds(1));
  EXPECT_EQ(st[0].code(), absl::StatusCode::kUnavailable);
}

using UcxPeerFailureTest = UcxTransportTest;

TEST_P(UcxPeerFailureTest, APeerThatGoesAwayFailsOpsCleanlyAndReconnectWorks) {
  absl::StatusOr<uint64_t> conn = a_->Connect(b_->LocalAddress(), b_exposed_);
  ASSERT_TRUE(conn.ok()) << conn.status();
  std::vector<RmaOp> ops = {{a_mem_.data(), b_exposed_.base, 65536}};
  auto st = a_->Execute(*conn, RmaKind::kPut, ops, absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(st[0].ok()) << st[0];

  b_.reset();  // the peer exits
  std::vector<uint8_t> sink(65536);
  std::vector<RmaOp> gets = {{sink.data(), b_exposed_.base, 65536}};
  const absl::Time start = absl::Now();
  bool failed = false;
  // The failure may surface on the first operation or the next one, once
  // UCX has noticed the closed socket; it must within the deadline.
  for (int i = 0; i < 5 && !failed; ++i) {
    st = a_->Execute(*conn, RmaKind::kGet, gets, absl::Now() + absl::Seconds(3));
    failed = !st[0].ok();
  }
  EXPECT_TRUE(failed);
  EXPECT_TRUE(st[0].code() == absl::StatusCode::kUnavailable ||
              st[0].code() == absl::StatusCode::kDeadlineExceeded)
      << st[0];
  EXPECT_LT(absl::Now() - start, absl::Seconds(16));
  EXPECT_FALSE(a_->Describe(*conn).connected);
  a_->Disconnect(*conn);

  // A new peer (the restarted daemon) is reachable with a new connection.
  auto b = UcxTransport::Create();
  ASSERT_TRUE(b.ok()) << b.status();
  b_ = std::move(*b);
  auto eb = b_->Expose(absl::MakeSpan(b_mem_));
  ASSERT_TRUE(eb.ok());
  absl::StatusOr<uint64_t> again = a_->Connect(b_->LocalAddress(), *eb);
  ASSERT_TRUE(again.ok()) << again.status();
  ops = {{a_mem_.data() + 7, eb->base + 100, 4096}};
  st = a_->Execute(*again, RmaKind::kPut, ops, absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(st[0].ok()) << st[0];
  EXPECT_EQ(0, std::memcmp(b_mem_.data() + 100, a_mem_.data() + 7, 4096));
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxTransportTest,
                         // With peer failure detection UCX 1.13 keeps
                         // shared memory out of two processes' lanes.
                         ::testing::Values(Setting{"tcp", "tcp/lo"}, Setting{"shm,tcp", "tcp/lo"}),
                         [](const auto& info) {
                           return std::string(info.index == 0 ? "Tcp" : "SharedMemory");
                         });

INSTANTIATE_TEST_SUITE_P(Tcp, UcxPeerFailureTest, ::testing::Values(Setting{"tcp", "tcp/lo"}));

TEST(CreateTransportTest, UcxBuildCreatesTheUcxBackend) {
  setenv("UCX_NET_DEVICES", "lo", 1);
  absl::StatusOr<std::unique_ptr<Transport>> t = CreateTransport();
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->Capabilities().name, "ucx");
  EXPECT_STREQ(TransportBackendName(), "ucx");
  EXPECT_FALSE((*t)->LocalAddress().empty());
}

}  // namespace
}  // namespace kvtier
