#include "server/proto_metrics.h"

#include <prometheus/text_serializer.h>

#include <sstream>

#include "gtest/gtest.h"
#include "kvtier/v1/admin.pb.h"

namespace kvtier {
namespace {

std::string Render(MetricFamilies& f) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, f.Take());
  return out.str();
}

TEST(ProtoMetricsTest, EveryNumberOfAViewBecomesOneSeries) {
  v1::GetStatusResponse status;
  status.set_blocks(7);
  status.set_uptime_seconds(3);
  status.mutable_counters()->set_lookup_hits(5);
  status.mutable_nvme()->set_degraded(true);
  status.mutable_planner()->set_plans_partial(2);
  status.mutable_build()->set_version("0.1.0");
  MetricFamilies f;
  f.AddMessage(status, "", {});
  const std::string text = Render(f);
  EXPECT_NE(text.find("# TYPE kvtier_blocks gauge\nkvtier_blocks 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kvtier_uptime_seconds 3\n"), std::string::npos);
  // Counters fields: counters, without a "counters_" prefix.
  EXPECT_NE(text.find("# TYPE kvtier_lookup_hits_total counter\nkvtier_lookup_hits_total 5\n"),
            std::string::npos);
  EXPECT_NE(text.find("kvtier_nvme_degraded 1\n"), std::string::npos);
  EXPECT_NE(text.find("kvtier_planner_plans_partial_total 2\n"), std::string::npos);
  // Strings are not series; BuildInfo is left out.
  EXPECT_EQ(text.find("version"), std::string::npos);
  EXPECT_EQ(text.find("kvtier_build_"), std::string::npos);
}

TEST(ProtoMetricsTest, LabelledRowsShareAFamily) {
  v1::TierStatus host, nvme;
  host.set_kind(v1::TIER_KIND_HOST);
  host.set_capacity_bytes(100);
  host.set_evictions(4);
  nvme.set_kind(v1::TIER_KIND_NVME);
  nvme.set_capacity_bytes(200);
  MetricFamilies f;
  f.AddMessage(host, "tier_", {{"tier", "host"}});
  f.AddMessage(nvme, "tier_", {{"tier", "nvme"}});
  const std::string text = Render(f);
  EXPECT_NE(text.find("kvtier_tier_capacity_bytes{tier=\"host\"} 100\n"
                      "kvtier_tier_capacity_bytes{tier=\"nvme\"} 200\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE kvtier_tier_evictions_total counter"), std::string::npos);
  size_t families = 0;
  for (size_t at = text.find("# TYPE kvtier_tier_capacity_bytes"); at != std::string::npos;
       at = text.find("# TYPE kvtier_tier_capacity_bytes", at + 1)) {
    ++families;
  }
  EXPECT_EQ(families, 1u);
}

}  // namespace
}  // namespace kvtier
