#include "cluster/member_record.h"

#include <gtest/gtest.h>

namespace kvtier {
namespace {

MemberRecord Sample() {
  MemberRecord r;
  r.node_id = "10.0.0.7:50051";
  r.daemon_id = "d-4f2a";
  r.address = "10.0.0.7:50051";
  r.role = "engine-node";
  r.version = "0.9.0";
  r.transport = true;
  r.host_capacity_bytes = 64ULL << 30;
  r.host_free_bytes = 1ULL << 30;
  r.nvme_capacity_bytes = 2ULL << 40;
  r.nvme_free_bytes = 12345;
  r.started = absl::FromUnixMillis(1'764'000'000'123);
  return r;
}

TEST(MemberRecordTest, RoundTrips) {
  const MemberRecord r = Sample();
  EXPECT_EQ(DecodeMemberRecord(EncodeMemberRecord(r)).value(), r);
}

TEST(MemberRecordTest, IgnoresUnknownFieldsAndDefaultsOptionalOnes) {
  const auto r =
      DecodeMemberRecord(R"({"node_id":"n1","daemon_id":"d","address":"a:1","future":[1,2]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->node_id, "n1");
  EXPECT_EQ(r->host_free_bytes, 0u);
  EXPECT_FALSE(r->transport);
}

TEST(MemberRecordTest, RejectsMalformedRecords) {
  for (const char* bad : {
           "",
           "[]",
           "not json",
           R"({"daemon_id":"d","address":"a"})",
           R"({"node_id":"","daemon_id":"d","address":"a"})",
           R"({"node_id":"a/b","daemon_id":"d","address":"a"})",
           R"({"node_id":"n","daemon_id":"","address":"a"})",
           R"({"node_id":"n","daemon_id":"d"})",
           R"({"node_id":7,"daemon_id":"d","address":"a"})",
           R"({"node_id":"n","daemon_id":"d","address":"a","host_free_bytes":-1})",
           R"({"node_id":"n","daemon_id":"d","address":"a","host_free_bytes":"9"})",
           R"({"node_id":"n","daemon_id":"d","address":"a","transport":1})",
       }) {
    const auto r = DecodeMemberRecord(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(MemberRecordTest, NodeIdRules) {
  EXPECT_TRUE(ValidateNodeId("node-1.rack_2:50051").ok());
  EXPECT_TRUE(ValidateNodeId("[fd00::7]:50051").ok());
  EXPECT_FALSE(ValidateNodeId("").ok());
  EXPECT_FALSE(ValidateNodeId(std::string(129, 'a')).ok());
  EXPECT_TRUE(ValidateNodeId(std::string(128, 'a')).ok());
  EXPECT_FALSE(ValidateNodeId("a b").ok());
  EXPECT_FALSE(ValidateNodeId("a/b").ok());
}

TEST(MemberRecordTest, Keys) {
  EXPECT_EQ(MembersPrefix("prod"), "/kvtier/prod/members/");
  EXPECT_EQ(MemberKey("prod", "n1"), "/kvtier/prod/members/n1");
}

}  // namespace
}  // namespace kvtier
