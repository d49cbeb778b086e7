#include "server/proto_metrics.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace kvtier {
namespace {

using google::protobuf::FieldDescriptor;

// Monotonic fields outside the Counters message.
bool IsCounterField(const std::string& name) {
  static const auto* names = new absl::flat_hash_set<std::string>{"bytes_written",
                                                                  "bytes_read",
                                                                  "bytes_sent",
                                                                  "bytes_received",
                                                                  "blocks_sent",
                                                                  "blocks_received",
                                                                  "transfers",
                                                                  "failed_transfers",
                                                                  "connects",
                                                                  "evictions",
                                                                  "tier_hits",
                                                                  "tier_promotions",
                                                                  "tier_evictions",
                                                                  "fp8_values",
                                                                  "fp8_clipped",
                                                                  "admissions_refused_budget",
                                                                  "plans_fetch",
                                                                  "plans_partial",
                                                                  "plans_recompute",
                                                                  "planned_fetch_tokens",
                                                                  "planned_recompute_tokens",
                                                                  "estimated_seconds_saved",
                                                                  "fills",
                                                                  "pulled_blocks",
                                                                  "pulled_bytes",
                                                                  "pull_failures",
                                                                  "pulls_declined",
                                                                  "pulls_backed_off",
                                                                  "offers",
                                                                  "offered_blocks",
                                                                  "offer_failures",
                                                                  "offers_dropped",
                                                                  "reported",
                                                                  "zmq_messages",
                                                                  "zmq_events",
                                                                  "zmq_resyncs",
                                                                  "subscribers_lost"};
  return names->contains(name);
}

// Messages whose numbers are descriptions, not measurements.
bool Skipped(const google::protobuf::Descriptor* d) {
  return d->full_name() == "kvtier.v1.NamespaceLayout" || d->full_name() == "kvtier.v1.BuildInfo";
}

}  // namespace

void MetricFamilies::Add(const std::string& name, prometheus::MetricType type,
                         const std::string& help, const MetricLabels& labels, double value) {
  prometheus::MetricFamily& f = families_[name];
  if (f.name.empty()) {
    f.name = name;
    f.help = help;
    f.type = type;
  }
  prometheus::ClientMetric m;
  for (const auto& [k, v] : labels) m.label.push_back({k, v});
  if (f.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
}

void MetricFamilies::AddMessage(const google::protobuf::Message& message, const std::string& prefix,
                                const MetricLabels& labels) {
  const google::protobuf::Descriptor* d = message.GetDescriptor();
  const google::protobuf::Reflection* r = message.GetReflection();
  const bool all_counters = d->full_name() == "kvtier.v1.Counters";
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    double value = 0;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        value = r->GetInt32(message, f);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        value = static_cast<double>(r->GetInt64(message, f));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        value = r->GetUInt32(message, f);
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        value = static_cast<double>(r->GetUInt64(message, f));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        value = r->GetDouble(message, f);
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        value = r->GetFloat(message, f);
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        value = r->GetBool(message, f) ? 1 : 0;
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE:
        if (!Skipped(f->message_type())) {
          const bool counters = f->message_type()->full_name() == "kvtier.v1.Counters";
          AddMessage(r->GetMessage(message, f), counters ? prefix : prefix + f->name() + "_",
                     labels);
        }
        continue;
      default:  // strings, bytes, enums
        continue;
    }
    const bool counter = all_counters || IsCounterField(f->name());
    Add(absl::StrCat("kvtier_", prefix, f->name(), counter ? "_total" : ""),
        counter ? prometheus::MetricType::Counter : prometheus::MetricType::Gauge,
        absl::StrCat(f->full_name(), " (see proto/kvtier/v1/admin.proto)"), labels, value);
  }
}

std::vector<prometheus::MetricFamily> MetricFamilies::Take() {
  std::vector<prometheus::MetricFamily> out;
  out.reserve(families_.size());
  for (auto& [name, f] : families_) out.push_back(std::move(f));
  families_.clear();
  return out;
}

}  // namespace kvtier
