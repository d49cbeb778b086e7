// kvtier::client::Client: the C++ client library for kvtierd's KvCache API. An engine
// connects once, opens its namespace, and then looks up, saves and loads
// blocks. Bulk bytes go through a registered shared-memory region (Save and
// Load, with a completion per block); Put and Get move bytes in messages for
// remote or simple clients.
//
// Errors are absl::Status with the daemon's gRPC code (docs/api.md lists
// them). Per-block outcomes of Save and Load are BlockCompletion values;
// "loaded" (OK) always means the bytes are in the region and verified.
//
// Thread-safety: a Client may be used from many threads at once. SaveAsync
// and LoadAsync run the call on their own thread; the region must stay
// registered and mapped until the future is ready. Lookup and Release wait
// for gRPC's callback threads to complete them: do not call them from one
// (from a gRPC callback or reactor of the engine's own), where they could
// wait for themselves until their deadline.
#ifndef KVTIER_INCLUDE_KVTIER_CLIENT_H_
#define KVTIER_INCLUDE_KVTIER_CLIENT_H_

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "kvtier/credentials.h"

namespace kvtier::client {

struct ClientOptions {
  absl::Duration timeout = absl::Seconds(30);  // per call
  int max_message_bytes = 64 << 20;
  Credentials credentials;  // TLS and token; none by default
};

// A layer group of a hybrid model; see LayerGroup in
// proto/kvtier/v1/types.proto.
struct LayerGroupSpec {
  std::string kind = "full_attention";  // full_attention, sliding_window, recurrent
  std::vector<uint32_t> layers;         // the model's layer indices
  uint32_t window_tokens = 0;           // sliding_window
  uint64_t state_bytes = 0;             // recurrent: one snapshot on this rank
  uint32_t checkpoint_tokens = 0;       // recurrent: a multiple of tokens_per_block
};

// One rank's KV layout; see NamespaceLayout in proto/kvtier/v1/types.proto.
struct KvLayoutSpec {
  uint32_t num_layers = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;
  std::string dtype = "bf16";  // bf16, fp16, fp32, fp8_e4m3, fp8_e5m2
  uint32_t tokens_per_block = 16;
  uint32_t tp_rank = 0;
  uint32_t tp_size = 1;
  // Hybrid models: the layer groups (empty: every layer full attention).
  std::vector<LayerGroupSpec> groups = {};
  // MLA: one latent vector (head_dim elements) per token and layer, no V;
  // num_kv_heads 1.
  bool latent = false;
};

struct NamespaceOptions {
  std::string model_id;
  KvLayoutSpec layout;
  std::string salt;
  std::string cost_model;         // catalog name for plans, e.g. "llama-3.1-8b"
  std::string model_config_json;  // or the model's config.json
  // Storage encoding: "" (as given) or "fp8" (e4m3 with scales; lossy, part
  // of the namespace's identity). For fp8, how blocks are ordered
  // ("vllm-nhd" by default) and the K scale group (0: the default).
  std::string encoding;
  std::string engine_layout;
  uint32_t k_group_tokens = 0;
};

struct OpenedNamespace {
  std::string id;
  uint64_t block_bytes = 0;
  bool created = false;
  bool plans_enabled = false;
  std::string plans_note;
  std::string encoding;                          // in words; "" when stored as given
  uint64_t stored_block_bytes = 0;               // what a block takes in the tiers
  std::vector<uint64_t> group_block_bytes = {};  // a hybrid's, per group
};

struct LookupOptions {
  bool take_lease = false;
  uint32_t lease_ttl_ms = 0;   // 0: the daemon's default
  uint32_t prompt_tokens = 0;  // for the plan; 0: matched tokens
  // Sets the matched blocks' retention priority (0..100, higher kept
  // longer; 0 when the conversation ended). Unset: left as they are.
  std::optional<uint32_t> retention_priority = std::nullopt;
};

struct FetchPlan {
  uint32_t fetch_blocks = 0;
  double fetch_seconds = 0;
  double recompute_seconds = 0;
  double total_seconds = 0;
};

// What one group of a hybrid namespace loads for the cut: the blocks of
// keys [first_key, first_key + sizes.size()).
struct GroupLoad {
  uint32_t group = 0;
  uint32_t first_key = 0;
  std::vector<uint64_t> sizes;
  std::vector<std::string> tiers;
  std::vector<bool> persisted;  // survives a daemon crash
};

struct LookupResult {
  // Matched keys; for a hybrid namespace the longest cut every group can
  // restore (tiers and persisted are then empty: see groups).
  uint32_t matched = 0;
  std::vector<std::string> tiers;  // per matched block: "host", "nvme", ...
  std::vector<bool> persisted;     // per matched block: survives a daemon crash
  std::string lease_id;            // empty without a lease
  std::optional<FetchPlan> plan;
  std::vector<GroupLoad> groups = {};  // a hybrid's, one per group
  // A hybrid's plan, when it chose a shorter restorable cut than `matched`
  // (0 < plan->fetch_blocks < matched): what each group loads for it.
  std::vector<GroupLoad> plan_groups = {};
};

// A block's place in a registered region.
struct RegionBlockRef {
  std::string key;
  std::string parent_key;  // Save only; empty for a root
  uint64_t offset = 0;
  uint64_t size_bytes = 0;  // Save: the block's size; Load: the room at offset
  // Instead of offset/size_bytes: the block's pieces in order (offset, size),
  // e.g. one per layer for engines that keep a tensor per layer.
  std::vector<std::pair<uint64_t, uint64_t>> segments;
  uint32_t group = 0;  // hybrid namespaces: the block's layer group
};

struct BlockCompletion {
  uint32_t index = 0;
  std::string key;
  absl::Status status;  // OK: stored (Save) or copied and verified (Load)
  uint64_t size_bytes = 0;
};

enum class TransferDirection { kPush, kPull };

struct TransferResult {
  // One per key: OK = cached on the receiver now; NOT_FOUND = not cached on
  // the source; anything else = not transferred (recompute it).
  std::vector<BlockCompletion> blocks;
  uint64_t bytes_moved = 0;
  double transport_seconds = 0;
  std::string lanes;  // e.g. "tcp/lo"
};

struct PutOptions {
  std::string parent_key;  // the first block's parent; empty for a root
  // Bytes per message: each block goes in chunks of at most this many (the
  // first chunk names it), so a block as large as the daemon's message limit
  // still fits. Must be positive.
  uint64_t chunk_bytes = uint64_t{4} << 20;
  // Hybrid namespaces: the layer group of each block (empty: all group 0).
  // A block's parent is the previous block of the same group (the first
  // one's: parent_key). One Put is judged whole: put a prefix's attention
  // blocks and the snapshot that makes them restorable together.
  std::vector<uint32_t> groups = {};
  // Retention priority of the blocks (0..100, higher kept longer). Unset:
  // 35, and 0 for a partial last block (shorter than its parent).
  std::optional<uint32_t> retention_priority = std::nullopt;
};

struct PutResult {
  uint32_t blocks_stored = 0;          // new on the daemon
  uint32_t blocks_already_cached = 0;  // there before this call
  uint32_t blocks_unusable = 0;        // hybrid: stored, then dropped (no cut uses them)
};

// One message of a Get stream. The first chunk of each block names it (key
// and block_bytes set); offset is where data starts within that block.
struct GetChunkView {
  absl::string_view key;  // empty except on a block's first chunk
  uint64_t block_bytes = 0;
  uint64_t offset = 0;
  absl::string_view data;
};

struct CloseNamespaceResult {
  uint32_t leases_released = 0;
  uint64_t blocks_dropped = 0;
  uint64_t blocks_kept = 0;
};

class Client {
 public:
  // address: "host:port" or "unix:/path". Connects lazily; UNAVAILABLE shows
  // on the first call if nothing listens.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& address,
                                                         const ClientOptions& options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  absl::StatusOr<OpenedNamespace> OpenNamespace(const NamespaceOptions& options);
  absl::StatusOr<LookupResult> Lookup(const std::string& ns, absl::Span<const std::string> keys,
                                      const LookupOptions& options = {});
  absl::StatusOr<uint32_t> Release(const std::string& lease_id);
  // Removes `keys` (with their descendants when `recursive`); returns how
  // many blocks went.
  absl::StatusOr<uint32_t> Delete(const std::string& ns, absl::Span<const std::string> keys,
                                  bool recursive = false);

  // Closes `ns` (frees its slot in the namespace limits and ends the
  // caller's leases in it); with drop_blocks its unpinned blocks go too.
  absl::StatusOr<CloseNamespaceResult> CloseNamespace(const std::string& ns,
                                                      bool drop_blocks = false);

  // Stores blocks from messages: keys[i] (parent keys[i-1], the first has
  // `parent_key`) with data[i]. All or nothing.
  absl::Status Put(const std::string& ns, absl::Span<const std::string> keys,
                   absl::Span<const std::string> data, const std::string& parent_key = "");
  // The same over views of the caller's bytes (e.g. slices of one file),
  // with the chunk size chosen and the daemon's counts returned.
  absl::StatusOr<PutResult> PutBlocks(const std::string& ns, absl::Span<const std::string> keys,
                                      absl::Span<const absl::string_view> data,
                                      const PutOptions& options = {});
  // Moves the cached prefix of `keys` between this daemon and the daemon at
  // `peer` ("host:port"): kPush sends from this daemon, kPull fetches into
  // it. timeout 0 = the daemon's peer.timeout. The call's error is for the
  // request as a whole; per-block outcomes are in the result.
  absl::StatusOr<TransferResult> Transfer(const std::string& ns, absl::Span<const std::string> keys,
                                          const std::string& peer, TransferDirection direction,
                                          absl::Duration timeout = absl::ZeroDuration());
  // `group`: the layer group of a hybrid namespace whose blocks to fetch.
  absl::StatusOr<std::vector<std::string>> Get(const std::string& ns,
                                               absl::Span<const std::string> keys,
                                               uint32_t group = 0);
  // Get without holding the blocks: on_chunk sees each message as it
  // arrives, unchecked (the caller checks order and sizes). When on_chunk
  // returns false the call is cancelled and the result is CANCELLED;
  // otherwise it is the call's status.
  absl::Status GetChunks(const std::string& ns, absl::Span<const std::string> keys,
                         const std::function<bool(const GetChunkView&)>& on_chunk,
                         uint32_t group = 0);

  // A shared-memory file the caller created (mode 0600, owned by the
  // daemon's user); returns the region id. The region is tied to
  // `owner_pid` (default: this process; 0: to none, e.g. when the daemon
  // cannot see this process's pid namespace): the daemon drops it when that
  // process exits.
  absl::StatusOr<std::string> RegisterMemory(const std::string& path, uint64_t size_bytes,
                                             int owner_pid = -1);
  // GPU tensors shared by CUDA IPC (cudaIpcGetMemHandle), laid end to end
  // in the region: tensor i starts at the sum of the sizes before it.
  struct CudaIpcTensor {
    std::string handle;  // the 64-byte cudaIpcMemHandle_t
    uint64_t offset = 0;
    uint64_t size_bytes = 0;
  };
  absl::StatusOr<std::string> RegisterCudaIpc(int device, absl::Span<const CudaIpcTensor> tensors,
                                              int owner_pid = -1);
  absl::Status UnregisterMemory(const std::string& region_id);

  // Calls on_block for each completion as it arrives; returns the call's
  // status (a request error, or OK once every block has its completion).
  // `retention_priority`: as PutOptions'.
  absl::Status Save(const std::string& ns, const std::string& region_id,
                    absl::Span<const RegionBlockRef> blocks,
                    const std::function<void(const BlockCompletion&)>& on_block,
                    std::optional<uint32_t> retention_priority = std::nullopt);
  absl::Status Load(const std::string& ns, const std::string& region_id,
                    absl::Span<const RegionBlockRef> blocks,
                    const std::function<void(const BlockCompletion&)>& on_block);
  // The same, collecting completions, on a thread of their own.
  std::future<absl::StatusOr<std::vector<BlockCompletion>>> SaveAsync(
      std::string ns, std::string region_id, std::vector<RegionBlockRef> blocks);
  std::future<absl::StatusOr<std::vector<BlockCompletion>>> LoadAsync(
      std::string ns, std::string region_id, std::vector<RegionBlockRef> blocks);

 private:
  class Impl;
  explicit Client(std::shared_ptr<Impl> impl);
  // Shared with running SaveAsync/LoadAsync calls, which may outlive the
  // Client.
  std::shared_ptr<Impl> impl_;
};

}  // namespace kvtier::client

#endif  // KVTIER_INCLUDE_KVTIER_CLIENT_H_
