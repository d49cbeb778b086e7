#include "transfer/transfer_steps.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace kvtier {

absl::Status Annotate(const absl::Status& s, absl::string_view prefix) {
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

absl::Time CleanupDeadline(absl::Time deadline) {
  return std::max(deadline, absl::Now() + absl::Seconds(2));
}

absl::Duration HoldFor(absl::Time deadline) {
  return 2 * std::max(deadline - absl::Now(), absl::ZeroDuration()) + absl::Seconds(5);
}

absl::Status FirstFailure(const std::vector<absl::Status>& blocks) {
  for (const absl::Status& s : blocks) {
    if (!s.ok() && !absl::IsNotFound(s)) return s;
  }
  return absl::OkStatus();
}

size_t CountOk(const std::vector<absl::Status>& blocks) {
  return std::count_if(blocks.begin(), blocks.end(), [](const absl::Status& s) { return s.ok(); });
}

Moved Move(Transport& transport, uint64_t connection, RmaKind kind, const std::vector<RmaOp>& ops,
           const std::vector<size_t>& op_block, size_t blocks, absl::Time deadline) {
  Moved m;
  m.received = blocks;
  if (ops.empty()) return m;
  const absl::Time start = absl::Now();
  std::vector<absl::Status> st = transport.Execute(connection, kind, ops, deadline);
  m.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  for (size_t j = 0; j < ops.size(); ++j) {
    if (!st[j].ok()) {
      m.received = op_block[j];
      m.error = st[j];
      break;
    }
    m.bytes += ops[j].bytes;
  }
  return m;
}

}  // namespace kvtier
