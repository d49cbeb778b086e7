#include "server/grpc_auth.h"

#include <grpcpp/server_context.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"

namespace kvtier {
namespace {

// A refusal is counted every time even though its log line is written at
// most once per 10 s (server/log_rate_limiter.h).
TEST(GrpcAuthTest, EveryRefusalIsCountedWhileItsLogIsRateLimited) {
  absl::StatusOr<std::unique_ptr<Authenticator>> auth =
      Authenticator::FromYaml("identities:\n  - {name: a, token: a-token-0123456789, tenant: t}\n");
  ASSERT_TRUE(auth.ok()) << auth.status();
  grpc::ServerContext context;  // no credentials at all
  const absl::string_view reason =
      "no credentials: send 'authorization: Bearer <token>' or a client certificate";
  const uint64_t before = RefusalCount(**auth, reason);
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
  const std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<Identity> who = Admit(**auth, context, Role::kTenant);
    ASSERT_EQ(who.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(who.status().message(), reason);
  }
  spdlog::set_default_logger(previous);
  EXPECT_EQ(RefusalCount(**auth, reason), before + 100);
  // One line for the 100 (this authenticator logged none before).
  const std::vector<std::string> lines = sink->last_formatted();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(std::string(reason)), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace kvtier
