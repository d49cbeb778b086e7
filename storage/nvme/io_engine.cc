#include "storage/nvme/io_engine.h"

#include "absl/strings/str_cat.h"
#include "storage/nvme/uring/uring_io_engine.h"

namespace kvtier {

std::vector<absl::Status> IoEngine::RunNotifying(absl::Span<const IoOp> ops, OpDone done) {
  std::vector<absl::Status> status = Run(ops);
  for (size_t i = 0; i < status.size(); ++i) done(i, status[i]);
  return status;
}

absl::StatusOr<std::unique_ptr<IoEngine>> CreateIoEngine(const IoEngineOptions& options,
                                                         std::string* note) {
  auto say = [note](std::string text) {
    if (note != nullptr) *note = std::move(text);
  };
  if (options.queue_depth == 0 || options.queue_depth > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("io queue depth ", options.queue_depth, " is not in 1..4096"));
  }
  if (options.kind == "pread") {
    say("pread/pwrite (configured)");
    return CreatePosixIoEngine();
  }
  if (options.kind != "auto" && options.kind != "io_uring") {
    return absl::InvalidArgumentError(
        absl::StrCat("io engine '", options.kind, "' is not one of auto, io_uring, pread"));
  }
  absl::StatusOr<std::unique_ptr<IoEngine>> uring = CreateUringIoEngine(options.queue_depth);
  if (uring.ok()) {
    say(absl::StrCat("io_uring, queue depth ", options.queue_depth));
    return uring;
  }
  if (options.kind == "io_uring") return uring.status();
  say(absl::StrCat("pread/pwrite (io_uring unavailable: ", uring.status().message(), ")"));
  return CreatePosixIoEngine();
}

}  // namespace kvtier
