#include "base/grpc_status.h"

#include <gtest/gtest.h>

namespace kvtier {
namespace {

TEST(GrpcStatusTest, EveryCodeAndMessageSurvivesTheRoundTrip) {
  for (int code = 0; code <= 16; ++code) {
    const absl::Status domain(static_cast<absl::StatusCode>(code), code == 0 ? "" : "why");
    const grpc::Status edge = ToGrpc(domain);
    EXPECT_EQ(static_cast<int>(edge.error_code()), code);
    EXPECT_EQ(edge.error_message(), code == 0 ? "" : "why");
    EXPECT_EQ(FromGrpc(edge), domain);
  }
}

TEST(GrpcStatusTest, OkIsOkBothWays) {
  EXPECT_TRUE(ToGrpc(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpc(grpc::Status::OK).ok());
  // grpc::Status::OK with a message still reads as OK, as absl has no OK with a message.
  EXPECT_TRUE(FromGrpc(grpc::Status(grpc::StatusCode::OK, "ignored")).ok());
}

TEST(GrpcStatusTest, NamedCodesMatch) {
  EXPECT_EQ(ToGrpc(absl::NotFoundError("x")).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpc(absl::ResourceExhaustedError("x")).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(FromGrpc(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")),
            absl::UnavailableError("down"));
}

}  // namespace
}  // namespace kvtier
