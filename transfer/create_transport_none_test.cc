#include <gtest/gtest.h>

#include "transfer/transport_factory.h"

namespace kvtier {
namespace {

TEST(CreateTransportTest, WithoutUcxReportsUnavailableAndWhy) {
  absl::StatusOr<std::unique_ptr<Transport>> t = CreateTransport();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(t.status().message().find("without UCX"), std::string::npos) << t.status();
  EXPECT_STREQ(TransportBackendName(), "");
}

}  // namespace
}  // namespace kvtier
