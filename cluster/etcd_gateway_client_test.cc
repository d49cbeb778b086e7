#include "cluster/etcd_gateway_client.h"

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "cluster/testing/etcd_process.h"

namespace kvtier {
namespace {

// A loopback URL nothing listens on (port 1 needs root to bind).
constexpr char kDeadEndpoint[] = "127.0.0.1:1";

std::unique_ptr<EtcdGatewayClient> Client(std::vector<std::string> endpoints) {
  auto client = EtcdGatewayClient::Create(
      {.endpoints = std::move(endpoints), .timeout = absl::Milliseconds(1500)});
  EXPECT_TRUE(client.ok()) << client.status();
  return std::move(client).value();
}

TEST(EtcdGatewayClientTest, RejectsBadOptions) {
  EXPECT_EQ(EtcdGatewayClient::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EtcdGatewayClient::Create({.endpoints = {"https://e:2379"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EtcdGatewayClient::Create({.endpoints = {""}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EtcdGatewayClient::Create({.endpoints = {"e:2379"}, .timeout = absl::ZeroDuration()})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EtcdGatewayClientTest, NoEtcdIsUnavailableQuickly) {
  auto client = Client({kDeadEndpoint, "http://127.0.0.1:1/"});
  const absl::Time start = absl::Now();
  const absl::Status put = client->Put("/k", "v", 0);
  EXPECT_EQ(put.code(), absl::StatusCode::kUnavailable) << put;
  EXPECT_NE(put.message().find("127.0.0.1:1"), std::string::npos) << put;
  EXPECT_EQ(client->GetPrefix("/").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - start, absl::Seconds(6));  // two calls, two endpoints, 1.5 s each
}

class RealEtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdProcess::Binary().empty()) {
      GTEST_SKIP() << "no etcd binary (scripts/install-deps installs etcd-server)";
    }
    auto etcd = EtcdProcess::Start();
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = std::move(etcd).value();
  }
  std::unique_ptr<EtcdProcess> etcd_;
};

TEST_F(RealEtcdTest, PutsAndReadsAPrefixByteExact) {
  auto client = Client({etcd_->endpoint()});
  const std::string binary("v\0\xff\x01 end", 9);
  ASSERT_TRUE(client->Put("/kvtier/c/members/a", binary, 0).ok());
  ASSERT_TRUE(client->Put("/kvtier/c/members/b", "", 0).ok());
  ASSERT_TRUE(client->Put("/kvtier/c/membersX", "sibling", 0).ok());
  ASSERT_TRUE(client->Put("/kvtier/d/members/a", "other cluster", 0).ok());
  auto kvs = client->GetPrefix("/kvtier/c/members/");
  ASSERT_TRUE(kvs.ok()) << kvs.status();
  ASSERT_EQ(kvs->size(), 2u);
  EXPECT_EQ((*kvs)[0].key, "/kvtier/c/members/a");
  EXPECT_EQ((*kvs)[0].value, binary);
  EXPECT_EQ((*kvs)[1].key, "/kvtier/c/members/b");
  EXPECT_EQ((*kvs)[1].value, "");
  EXPECT_TRUE(client->GetPrefix("/nothing/").value().empty());
}

TEST_F(RealEtcdTest, LeasedKeysGoWithTheLease) {
  auto client = Client({etcd_->endpoint()});
  auto lease = client->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client->Put("/l/k", "v", *lease).ok());
  auto kvs = client->GetPrefix("/l/");
  ASSERT_EQ(kvs.value().size(), 1u);
  EXPECT_EQ((*kvs)[0].lease, *lease);
  EXPECT_TRUE(client->KeepAlive(*lease).ok());
  ASSERT_TRUE(client->RevokeLease(*lease).ok());
  EXPECT_TRUE(client->GetPrefix("/l/").value().empty());
  EXPECT_EQ(client->KeepAlive(*lease).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client->Put("/l/k", "v", *lease).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(client->RevokeLease(*lease).ok());  // already gone is fine
}

TEST_F(RealEtcdTest, AnExpiredLeaseTakesItsKeys) {
  auto client = Client({etcd_->endpoint()});
  auto lease = client->GrantLease(absl::Seconds(1));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client->Put("/e/k", "v", *lease).ok());
  // etcd expires a 1 s lease within about 1.5 s; allow it 5.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (absl::Now() < deadline && !client->GetPrefix("/e/").value().empty()) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(client->GetPrefix("/e/").value().empty());
  EXPECT_EQ(client->KeepAlive(*lease).code(), absl::StatusCode::kNotFound);
}

TEST_F(RealEtcdTest, FailsOverToTheEndpointThatAnswersAndBackAfterARestart) {
  auto client = Client({kDeadEndpoint, etcd_->endpoint()});
  ASSERT_TRUE(client->Put("/f/k", "v", 0).ok());
  etcd_->Stop();
  EXPECT_EQ(client->GetPrefix("/f/").status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(etcd_->Restart().ok());
  auto kvs = client->GetPrefix("/f/");
  ASSERT_TRUE(kvs.ok()) << kvs.status();
  ASSERT_EQ(kvs->size(), 1u);  // the data survived the restart
  EXPECT_EQ((*kvs)[0].value, "v");
}

}  // namespace
}  // namespace kvtier
