#include "client/planner/report_format.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kvtier::planner {

using costmodel::Deployment;
using nlohmann::json;

std::string Bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = b;
  int u = 0;
  while (std::fabs(v) >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%.0f B", b)
                : absl::StrFormat("%.0f B (%.2f %s)", b, v, units[u]);
}

std::string Secs(double s) {
  if (std::isinf(s)) return "never";
  if (s >= 1) return absl::StrFormat("%.3f s", s);
  if (s >= 1e-3) return absl::StrFormat("%.3f ms", s * 1e3);
  if (s >= 1e-6) return absl::StrFormat("%.3f us", s * 1e6);
  return absl::StrFormat("%.3f ns", s * 1e9);
}

std::string Rate(double bps) {
  if (std::isinf(bps)) return "unreachable (latency alone exceeds recompute)";
  return absl::StrFormat("%.3f GB/s", bps / 1e9);
}

// JSON has no infinity: unbounded values are null.
json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string KvElement(const Deployment& d) { return d.kv_bytes_per_element == 1 ? "fp8" : "bf16"; }

json TierJson(const costmodel::TierLink& t) {
  return {{"name", t.name}, {"bytes_per_s", t.bytes_per_s}, {"latency_s", t.latency_s}};
}

}  // namespace kvtier::planner
