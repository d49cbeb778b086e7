// MetricFamilies: turns the Admin service's views (protobuf messages) into
// Prometheus metric families by reflection, so every number an operator
// sees in `kvtier status` is also a metric, under one naming rule:
//   kvtier_<prefix><field>            a gauge
//   kvtier_<prefix><field>_total      a counter (the fields of Counters, and
//                                     fields named in kCounterFields)
// Booleans read 1/0; strings and enums are left out (they become labels
// where they identify a series). Nested messages add "<field>_" to the
// prefix, except Counters, which adds nothing.
//
// Thread-safety: a value type; not thread-safe.
#ifndef KVTIER_SERVER_PROTO_METRICS_H_
#define KVTIER_SERVER_PROTO_METRICS_H_

#include <google/protobuf/message.h>
#include <prometheus/metric_family.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kvtier {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class MetricFamilies {
 public:
  // One sample. Samples of the same name join one family; `type` and `help`
  // come from the first.
  void Add(const std::string& name, prometheus::MetricType type, const std::string& help,
           const MetricLabels& labels, double value);
  // Every numeric and boolean field of `message` (recursing into singular
  // sub-messages), named "kvtier_" + prefix + field.
  void AddMessage(const google::protobuf::Message& message, const std::string& prefix,
                  const MetricLabels& labels);
  std::vector<prometheus::MetricFamily> Take();

 private:
  std::map<std::string, prometheus::MetricFamily> families_;
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_PROTO_METRICS_H_
