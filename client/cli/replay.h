// `kvtier replay TRACE.jsonl`: drives a running kvtierd like an engine from a
// Mooncake-format trace. Each request's hash_ids are its prefix blocks (one
// per trace block of 512 tokens, keyed by the id); per request it looks the
// prefix up under a lease (with the daemon's fetch-or-recompute plan), loads
// the blocks the plan fetches through a shared-memory region, saves the
// blocks it had to compute, and releases the lease. Blocks carry
// --block-bytes of deterministic bytes (scaled down from the model's real
// block size so the trace fits a small machine); every loaded block is
// checked byte for byte.
//
// Thread-safety: single-threaded CLI code.
#ifndef KVTIER_CLIENT_CLI_REPLAY_H_
#define KVTIER_CLIENT_CLI_REPLAY_H_

#include <cstdint>
#include <string>

#include "kvtier/credentials.h"

namespace kvtier {

struct ReplayOptions {
  std::string address;
  Credentials credentials;
  std::string trace;
  std::string model = "llama-3.1-8b";  // catalog model: layout, plans, prefill estimate
  std::string gpu = "h100-sxm";        // for the prefill-time estimate
  uint64_t block_bytes = 64 * 1024;    // bytes stored per trace block
  uint32_t trace_block_tokens = 512;
  double speed = 0;    // 0: as fast as possible; else trace time / speed
  uint64_t limit = 0;  // requests; 0 = all
  bool json = false;
  bool progress = true;  // a progress bar on stderr
};

// Prints the summary (text or JSON) on stdout; 0 on success, 1 when the
// daemon failed or served wrong bytes, 2 for bad input.
int RunReplay(const ReplayOptions& options);

}  // namespace kvtier

#endif  // KVTIER_CLIENT_CLI_REPLAY_H_
