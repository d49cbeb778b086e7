#include "server/completion_runs.h"

namespace kvtier {

v1::BlockCompletion CompletionRuns::Message(const BlockOutcome& o) const {
  v1::BlockCompletion c;
  c.set_index(o.index);
  c.set_key(key_of_(o.index));
  c.set_code(static_cast<int32_t>(o.status.code()));
  c.set_message(std::string(o.status.message()));
  c.set_size_bytes(o.bytes);
  return c;
}

bool CompletionRuns::Add(const BlockOutcome& o) {
  if (!runs_) return push_(Message(o));
  if (pending_ && o.status.ok() && o.bytes == bytes_ && o.index == first_ + count_ &&
      count_ < kMaxRun) {
    ++count_;
    return count_ < kMaxRun || Flush();
  }
  if (!Flush()) return false;
  if (!o.status.ok()) return push_(Message(o));
  pending_ = true;
  first_ = o.index;
  count_ = 1;
  bytes_ = o.bytes;
  return true;
}

bool CompletionRuns::Flush() {
  if (!pending_) return true;
  pending_ = false;
  v1::BlockCompletion c = Message(BlockOutcome{first_, absl::OkStatus(), bytes_});
  if (count_ > 1) c.set_run(count_);
  return push_(std::move(c));
}

}  // namespace kvtier
