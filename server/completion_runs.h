// CompletionRuns: a Save's or Load's per-block outcomes as BlockCompletion
// messages, one per block, or (when the request asked for completion_runs)
// one per run of consecutive blocks that each succeeded with the same size,
// so a group of small blocks costs one message instead of one each.
//
// A run is pushed when it ends: at a failure or a size change (then the
// failure is pushed alone), at kMaxRun blocks, or at Flush. For host regions
// of one group a run ends with its copy group (both are 64 blocks from the
// request's start); elsewhere (device regions' smaller groups, layer groups)
// a completion waits for at most the kMaxRun - 1 blocks after it.
//
// Thread-safety: none; one call's outcomes arrive in order on one thread.
#ifndef KVTIER_SERVER_COMPLETION_RUNS_H_
#define KVTIER_SERVER_COMPLETION_RUNS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "datapath/region_copy.h"
#include "kvtier/v1/kvcache.pb.h"

namespace kvtier {

class CompletionRuns {
 public:
  static constexpr uint32_t kMaxRun = kRegionCopyGroup;

  // `push` sends one message (false: the caller is gone); `key_of(i)` is the
  // request's key of block i.
  CompletionRuns(bool runs, std::function<bool(v1::BlockCompletion)> push,
                 std::function<std::string(uint32_t)> key_of)
      : runs_(runs), push_(std::move(push)), key_of_(std::move(key_of)) {}

  // One block's outcome, in request order. False once a push failed.
  bool Add(const BlockOutcome& outcome);
  // Sends the pending run, if any. False if that push failed.
  bool Flush();

 private:
  v1::BlockCompletion Message(const BlockOutcome& outcome) const;

  const bool runs_;
  const std::function<bool(v1::BlockCompletion)> push_;
  const std::function<std::string(uint32_t)> key_of_;
  bool pending_ = false;
  uint32_t first_ = 0;
  uint32_t count_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_COMPLETION_RUNS_H_
