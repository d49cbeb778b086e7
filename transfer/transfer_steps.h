// The steps both directions of a peer transfer share (PeerSource's push,
// PeerReceiver's pull): running one batch of remote operations and finding
// how many leading blocks arrived whole (Move), the hold and clean-up
// deadlines a transfer asks of its peer, and summaries of per-block
// statuses.
//
// Thread-safety: stateless functions; Move is as thread-safe as the
// Transport (which is).
#ifndef KVTIER_TRANSFER_TRANSFER_STEPS_H_
#define KVTIER_TRANSFER_TRANSFER_STEPS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "transfer/transport.h"

namespace kvtier {

// `s` with `prefix` before its message, same code.
absl::Status Annotate(const absl::Status& s, absl::string_view prefix);

// Calls that clean up after a transfer get a little time even when the
// transfer used up its deadline, so the other side frees what it holds now
// rather than at its ttl.
absl::Time CleanupDeadline(absl::Time deadline);

// How long the other side should hold slots or pins for a transfer with
// this deadline: past our deadline (after which our transport has closed the
// connection, so nothing of this transfer can still arrive) with a margin.
absl::Duration HoldFor(absl::Time deadline);

// The first status that is neither OK nor NOT_FOUND (blocks the source does
// not have are not a failure of the transfer).
absl::Status FirstFailure(const std::vector<absl::Status>& blocks);

size_t CountOk(const std::vector<absl::Status>& blocks);

struct Moved {
  size_t received = 0;  // leading blocks whose bytes all moved
  absl::Status error;   // the transport's error for block `received`
  uint64_t bytes = 0;
  double seconds = 0;
};

// Runs `ops` (one per block that needs bytes, `op_block[j]` naming its
// block, of `blocks` in all) and returns how many leading blocks arrived
// whole, with the transport error of the first that did not.
Moved Move(Transport& transport, uint64_t connection, RmaKind kind, const std::vector<RmaOp>& ops,
           const std::vector<size_t>& op_block, size_t blocks, absl::Time deadline);

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_TRANSFER_STEPS_H_
