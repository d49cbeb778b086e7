#include "storage/namespace_table.h"

#include "gtest/gtest.h"

namespace kvtier {
namespace {

NamespaceSpec Spec(const std::string& model, const std::string& tenant = "") {
  NamespaceSpec s;
  s.model_id = model;
  s.tenant = tenant;
  s.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};
  return s;
}

class NamespaceTableTest : public ::testing::Test {
 protected:
  TenantQuotas quotas_{
      TenantLimits{.max_namespaces = 2, .max_leases = 10, .max_reserved_bytes = 1000}};
  NamespaceTable table_{3, &quotas_};
};

TEST_F(NamespaceTableTest, OpenIsIdempotentAndChargesOnce) {
  const NamespaceId id = NamespaceId::Of(Spec("a", "t"));
  absl::StatusOr<OpenedNamespace> first = table_.Open(id, Spec("a", "t"), 4096);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->created);
  EXPECT_EQ(first->block_bytes, 4096u);
  absl::StatusOr<OpenedNamespace> again = table_.Open(id, Spec("a", "t"), 4096);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(table_.open_count(), 1u);
  EXPECT_EQ(quotas_.Usage("t").namespaces, 1u);
  ASSERT_TRUE(table_.FindOpen(id).ok());
  EXPECT_EQ((*table_.FindOpen(id))->block_bytes, 4096u);
}

TEST_F(NamespaceTableTest, LimitsAndTenantShares) {
  ASSERT_TRUE(table_.Open(NamespaceId::Of(Spec("a", "t")), Spec("a", "t"), 1).ok());
  ASSERT_TRUE(table_.Open(NamespaceId::Of(Spec("b", "t")), Spec("b", "t"), 1).ok());
  // Tenant "t" holds its share of 2.
  EXPECT_EQ(table_.Open(NamespaceId::Of(Spec("c", "t")), Spec("c", "t"), 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(table_.Open(NamespaceId::Of(Spec("c", "u")), Spec("c", "u"), 1).ok());
  // The daemon-wide limit of 3.
  absl::StatusOr<OpenedNamespace> over =
      table_.Open(NamespaceId::Of(Spec("d", "v")), Spec("d", "v"), 1);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.status().message(), "this daemon already has 3 namespaces open (max_namespaces)");
  EXPECT_EQ(table_.open_count(), 3u);
}

TEST_F(NamespaceTableTest, RecoveredNamespaceServesNothingUntilOpened) {
  const NamespaceId id = NamespaceId::Of(Spec("a"));
  table_.AddRecoveredBlock(id, 100);
  table_.AddRecoveredBlock(id, 50);
  EXPECT_EQ(table_.open_count(), 0u);
  EXPECT_EQ(table_.FindOpen(id).status().code(), absl::StatusCode::kNotFound);
  ASSERT_NE(table_.FindAny(id), nullptr);
  EXPECT_EQ(table_.FindAny(id)->blocks, 2u);
  EXPECT_EQ(table_.total_bytes(), 150u);
  absl::StatusOr<OpenedNamespace> opened = table_.Open(id, Spec("a"), 4096);
  ASSERT_TRUE(opened.ok());
  EXPECT_FALSE(opened->created);  // re-opened, with its blocks
  EXPECT_EQ((*table_.FindOpen(id))->bytes, 150u);
}

TEST_F(NamespaceTableTest, UnopenedNamespaceGoesWithItsLastBlock) {
  const NamespaceId id = NamespaceId::Of(Spec("a"));
  table_.AddRecoveredBlock(id, 10);
  table_.AddRecoveredBlock(id, 20);
  table_.RemoveBlock(id, 10);
  ASSERT_NE(table_.FindAny(id), nullptr);
  table_.RemoveBlock(id, 20);
  EXPECT_EQ(table_.FindAny(id), nullptr);
  EXPECT_EQ(table_.total_bytes(), 0u);
}

TEST_F(NamespaceTableTest, CloseRefundsAndErasesAnEmptyNamespace) {
  const NamespaceId empty = NamespaceId::Of(Spec("a", "t"));
  const NamespaceId full = NamespaceId::Of(Spec("b", "t"));
  ASSERT_TRUE(table_.Open(empty, Spec("a", "t"), 1).ok());
  ASSERT_TRUE(table_.Open(full, Spec("b", "t"), 1).ok());
  table_.AddBlocks(*table_.FindOpen(full), 2, 8);
  table_.Close(empty);
  table_.Close(full);
  EXPECT_EQ(quotas_.Usage("t").namespaces, 0u);
  EXPECT_EQ(table_.FindAny(empty), nullptr);
  ASSERT_NE(table_.FindAny(full), nullptr);  // kept with its blocks, closed
  EXPECT_FALSE(table_.FindAny(full)->opened);
  EXPECT_EQ(table_.open_count(), 0u);
  EXPECT_EQ(table_.total_bytes(), 8u);
}

TEST_F(NamespaceTableTest, NvmeAdmission) {
  const NamespaceId id = NamespaceId::Of(Spec("a"));
  EXPECT_EQ(table_.SetNvmeAdmission(id, false).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(table_.AdmitsNvme(id));  // unknown: not refused
  ASSERT_TRUE(table_.Open(id, Spec("a"), 1).ok());
  ASSERT_TRUE(table_.SetNvmeAdmission(id, false).ok());
  EXPECT_FALSE(table_.AdmitsNvme(id));
  ASSERT_TRUE(table_.SetNvmeAdmission(id, true).ok());
  EXPECT_TRUE(table_.AdmitsNvme(id));
}

}  // namespace
}  // namespace kvtier
