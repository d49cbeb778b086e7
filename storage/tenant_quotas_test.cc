#include "storage/tenant_quotas.h"

#include "gtest/gtest.h"

namespace kvtier {
namespace {

TenantLimits Small() {
  TenantLimits l;
  l.max_namespaces = 2;
  l.max_leases = 3;
  l.max_lease_blocks = 10;
  l.max_reserved_bytes = 100;
  return l;
}

TEST(TenantQuotasTest, NamespacesAreCountedPerTenant) {
  TenantQuotas q(Small());
  EXPECT_TRUE(q.ChargeNamespace("a").ok());
  EXPECT_TRUE(q.ChargeNamespace("a").ok());
  const absl::Status full = q.ChargeNamespace("a");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("tenant 'a'"), absl::string_view::npos) << full;
  EXPECT_NE(full.message().find("limits.tenant_max_namespaces"), absl::string_view::npos);
  // Another tenant is not affected by a's limit.
  EXPECT_TRUE(q.ChargeNamespace("b").ok());
  EXPECT_EQ(q.Usage("a").namespaces, 2u);
  EXPECT_EQ(q.Usage("b").namespaces, 1u);
  q.RefundNamespace("a");
  EXPECT_TRUE(q.ChargeNamespace("a").ok());
}

TEST(TenantQuotasTest, LeasesAreBoundedByCountAndByBlocks) {
  TenantQuotas q(Small());
  EXPECT_TRUE(q.ChargeLease("a", 4).ok());
  EXPECT_TRUE(q.ChargeLease("a", 6).ok());  // exactly 10 blocks
  EXPECT_EQ(q.ChargeLease("a", 1).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(q.Usage("a").leases, 2u);
  EXPECT_EQ(q.Usage("a").lease_blocks, 10u);
  q.RefundLease("a", 6);
  EXPECT_EQ(q.Usage("a").lease_blocks, 4u);
  EXPECT_TRUE(q.ChargeLease("a", 1).ok());
  EXPECT_TRUE(q.ChargeLease("a", 1).ok());
  // Three leases held: the count limit refuses a fourth however small.
  EXPECT_EQ(q.ChargeLease("a", 1).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(q.ChargeLease("b", 10).ok());
}

TEST(TenantQuotasTest, ReservationsAndTidyUp) {
  TenantQuotas q(Small());
  EXPECT_TRUE(q.ChargeReservation("a", 60).ok());
  EXPECT_EQ(q.ChargeReservation("a", 41).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(q.Usage("a").reserved_bytes, 60u);  // a refused charge changes nothing
  EXPECT_TRUE(q.ChargeReservation("a", 40).ok());
  EXPECT_TRUE(q.ChargeReservation("b", 100).ok());
  EXPECT_EQ(q.tenants(), 2u);
  q.RefundReservation("a", 100);
  q.RefundReservation("b", 100);
  EXPECT_EQ(q.tenants(), 0u);  // nothing held: no entry kept
  // A refused charge by a tenant holding nothing leaves no entry either.
  EXPECT_EQ(q.ChargeReservation("c", 101).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(q.tenants(), 0u);
}

}  // namespace
}  // namespace kvtier
