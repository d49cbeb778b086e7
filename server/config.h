// DaemonConfig: every setting of kvtierd, with its embedded default, its YAML
// key and its flag. Precedence: embedded defaults < YAML file (--config) <
// flags (--set KEY=VALUE and the named shortcuts). Unknown keys are errors
// that name the key.
//
// YAML layout (every key optional):
//   server:    listen, max_message_bytes, get_chunk_bytes, shutdown_grace_ms,
//              max_connection_idle_ms, call_threads
//   host_tier: bytes, slab_bytes, huge_pages, prefault
//   limits:    max_block_bytes, max_namespaces, max_keys_per_request, max_leases,
//              max_calls_per_method
//   leases:    default_ttl_ms, max_ttl_ms
//   log:       level
//   security:  tls_cert, tls_key, tls_client_ca, identities_file, peer_tls_ca,
//              peer_token_file
//   metrics:   listen, max_namespaces
//   cluster:   etcd, name, node_id, advertise, lease_ttl_ms, etcd_timeout_ms,
//              pull_timeout_ms
//   events:    zmq_endpoint, zmq_replay_endpoint, zmq_topic, zmq_model,
//              zmq_hashes, zmq_buffer_steps
//   nvme:      dirs, bytes_per_dir, slab_bytes, io_engine, queue_depth,
//              write_policy, write_through_hits, admit_min_uses,
//              host_high_watermark, host_low_watermark, high_watermark,
//              low_watermark, mover_interval_ms, device_capacity_bytes, dwpd,
//              warranty_years, wear_safety, wear_burst_seconds, register_arena
// Sizes accept plain integers or IEC suffixes: 512KiB, 64MiB, 8GiB, 1TiB.
//
// Thread-safety: value type; the functions are pure.
#ifndef KVTIER_SERVER_CONFIG_H_
#define KVTIER_SERVER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvtier {

struct DaemonConfig {
  // gRPC address: "host:port" (port 0 picks a free one) or "unix:/path".
  std::string listen = "127.0.0.1:50051";
  uint64_t max_message_bytes = uint64_t{16} << 20;
  uint64_t get_chunk_bytes = uint64_t{1} << 20;
  uint32_t shutdown_grace_ms = 5000;
  // A connection with no call for this long is closed (the client reconnects
  // at its next call); 0: never.
  uint32_t max_connection_idle_ms = 300'000;

  uint64_t host_tier_bytes = 0;  // set by DefaultConfig from RAM
  uint64_t host_slab_bytes = uint64_t{64} << 20;
  bool host_huge_pages = true;
  bool host_prefault = false;  // fault in the whole arena at start
  // Which blocks the tiers reclaim first: "value" or "lru" (BlockCacheOptions).
  std::string eviction_policy = "value";

  uint64_t max_block_bytes = uint64_t{64} << 20;
  uint32_t max_namespaces = 1024;
  uint32_t max_keys_per_request = 65536;
  uint32_t max_leases = 1 << 16;
  uint32_t max_regions = 64;                        // registered memory regions
  uint64_t max_region_bytes = uint64_t{256} << 30;  // their mapped bytes in all
  // Each tenant's share of the limits above (with authentication off there
  // is one tenant and the shares are the whole, except lease blocks and
  // reserved bytes, which bound memory): docs/security.md.
  uint32_t tenant_max_namespaces = 256;
  uint32_t tenant_max_leases = 16384;
  uint32_t tenant_max_lease_blocks = 1 << 21;  // blocks pinned by one tenant's leases
  uint32_t tenant_max_regions = 16;
  uint64_t tenant_max_region_bytes = uint64_t{64} << 30;
  // Host bytes one tenant's unfinished writes may reserve; 0 = half the
  // tier with authentication, the whole tier without.
  uint64_t tenant_reserved_bytes = 0;
  // A Put, Get, Save or Load stream that moves nothing for this long is
  // cancelled (and what it reserved or pinned is freed); 0: never.
  uint32_t stream_idle_timeout_ms = 30'000;
  // Threads that run the KvCache service's calls (the Admin and Peer
  // services have a quarter each, at least 2): calls beyond them queue.
  uint32_t call_threads = 16;
  // Calls of one method in flight (queued or running); the next is
  // RESOURCE_EXHAUSTED.
  uint32_t max_calls_per_method = 1024;
  std::string shm_dir = "/dev/shm";  // where RegisterMemory files must be

  uint32_t default_lease_ttl_ms = 30'000;
  uint32_t max_lease_ttl_ms = 600'000;

  std::string log_level = "info";

  // NVMe tier; off when nvme_dirs is empty. See docs/operations.md.
  std::string nvme_dirs;  // comma-separated, one per device
  uint64_t nvme_bytes_per_dir = 0;
  uint64_t nvme_slab_bytes = uint64_t{128} << 20;
  std::string nvme_io_engine = "auto";
  uint32_t nvme_queue_depth = 32;
  std::string nvme_write_policy = "write_back";
  uint32_t nvme_write_through_hits = 2;
  uint32_t nvme_admit_min_uses = 2;
  double nvme_host_high_watermark = 0.90;
  double nvme_host_low_watermark = 0.80;
  double nvme_high_watermark = 0.95;
  double nvme_low_watermark = 0.90;
  uint32_t nvme_mover_interval_ms = 100;
  uint64_t nvme_device_capacity_bytes = 0;  // 0 = size of the dir's filesystem
  double nvme_dwpd = 1.0;
  double nvme_warranty_years = 5;
  double nvme_wear_safety = 0.8;
  uint32_t nvme_wear_burst_seconds = 3600;
  bool nvme_register_arena = false;

  // GPU tier (docs/operations.md): "auto" = min(4 GiB, 1/16 of the GPU's
  // memory) when this build has CUDA and the GPU is usable, "off", or a size.
  std::string gpu_tier = "auto";
  uint64_t gpu_tier_slot_bytes = uint64_t{4} << 20;  // one block per slot
  uint32_t gpu_device = 0;                           // the GPU the copy engine and the tier use

  // Prefill-to-decode transfer (docs/operations.md). transport: auto (UCX
  // when built with it and some peer.* key configures transfer; off
  // otherwise), ucx (fail to start without it) or off.
  std::string peer_transport = "auto";
  std::string peer_role = "both";  // prefill, decode or both
  uint32_t peer_timeout_ms = 10'000;
  uint32_t peer_max_pending = 1024;
  // Comma-separated host:port of the peers transfers may name ("" = any;
  // required when security.peer_token_file is set).
  std::string peer_allowed;
  // Network devices the peer transport may use: auto (UCX_NET_DEVICES when
  // set, else the interface owning server.listen's address), all, or a
  // comma-separated UCX device list ("lo", "eth0", "mlx5_0:1").
  std::string peer_net_devices = "auto";

  // Security (docs/operations.md#security). TLS is on when tls_cert and
  // tls_key are set; tls_client_ca additionally verifies client
  // certificates (mutual TLS; the handshake requires one unless identities
  // are configured, which accept a token instead). Authentication is on when
  // identities_file is set: every call must then present a known token or
  // client certificate.
  std::string tls_cert;       // PEM server certificate chain
  std::string tls_key;        // PEM private key
  std::string tls_client_ca;  // PEM CA bundle for client certificates
  std::string identities_file;
  // Outgoing calls to peer daemons: the CA that signed their certificates
  // (TLS to peers when set; this daemon's tls_cert/tls_key are its client
  // certificate) and a file holding the token to present ("" = none).
  std::string peer_tls_ca;
  std::string peer_token_file;

  // Prometheus metrics (docs/operations.md#metrics): host:port, or off.
  std::string metrics_listen = "127.0.0.1:9400";
  // Namespaces exported with their own labels (largest first); the rest
  // are counted in kvtier_namespaces_unlabelled (and in the tenant totals).
  uint32_t metrics_max_namespaces = 32;

  // Cluster membership on etcd (docs/operations.md#cluster). Off while
  // `cluster_etcd` is empty: the daemon runs alone.
  std::string cluster_etcd;  // comma-separated etcd client URLs (http://host:port)
  std::string cluster_name = "kvtier";
  // The address peers dial; "" = server.listen as bound (which must then
  // not be a wildcard or unix address).
  std::string cluster_advertise;
  std::string cluster_node_id;  // stable member id; "" = the advertised address
  uint32_t cluster_lease_ttl_ms = 5000;
  uint32_t cluster_etcd_timeout_ms = 1000;
  // Longest a Lookup or Get waits on the owner of a chain it misses.
  uint32_t cluster_pull_timeout_ms = 2000;

  // KV events for routers (docs/operations.md#kv-events): the blocks
  // entering and leaving the tiers in vLLM's format over ZeroMQ. Off while
  // `events_zmq_endpoint` is empty (Admin.WatchBlocks is always on).
  std::string events_zmq_endpoint;           // bound PUB socket, e.g. tcp://*:5557
  std::string events_zmq_replay_endpoint;    // bound ROUTER socket; "" = no replay
  std::string events_zmq_topic;              // every message's topic
  std::string events_zmq_model;              // only this model's namespaces; "" = all
  std::string events_zmq_hashes = "int";     // "int" (vLLM's default) or "bytes"
  uint32_t events_zmq_buffer_steps = 10000;  // messages kept for replay

  // Fetch-or-recompute planner (docs/planner.md).
  std::string costmodel_gpu = "auto";  // catalog GPU, or auto = the detected one
  double costmodel_mfu = 0.5;
  std::string costmodel_compute_dtype = "bf16";
  bool costmodel_probe_tiers = true;           // probe host/NVMe speed at start
  uint32_t costmodel_admission_tokens = 4096;  // prefix length tier value is judged at
};

// The embedded defaults. The host tier gets min(25% of physical memory,
// 8 GiB), rounded down to whole slabs (at least one slab). The NVMe tier
// lives in ./kvtier-data with min(10% of `free_disk_bytes`, 16 GiB); it is off
// when that is under one slab (and so when free_disk_bytes is 0).
DaemonConfig DefaultConfig(uint64_t physical_memory_bytes, uint64_t free_disk_bytes = 0);
// Free bytes on the filesystem holding `path` (0 if unknown).
uint64_t FreeDiskBytes(const std::string& path);
// Physical memory of this machine (sysconf).
uint64_t PhysicalMemoryBytes();

// Sets one key ("host_tier.bytes") from its text form. INVALID_ARGUMENT for
// an unknown key or a bad value; `config` is unchanged then.
absl::Status SetConfigKey(absl::string_view key, absl::string_view value, DaemonConfig* config);
// Applies "KEY=VALUE".
absl::Status SetConfigAssignment(absl::string_view assignment, DaemonConfig* config);
// Applies a YAML document. On any error (syntax, unknown key, bad value)
// returns INVALID_ARGUMENT naming the key or line, and leaves `config`
// unchanged.
absl::Status ApplyYaml(absl::string_view yaml, DaemonConfig* config);
// Reads and applies a YAML file; NOT_FOUND if it cannot be read,
// INVALID_ARGUMENT (before reading) for anything but a regular file of at
// most 1 MiB (a directory, /dev/zero, a FIFO). A key that appears twice in
// one mapping is INVALID_ARGUMENT naming it and both lines.
absl::Status ApplyYamlFile(const std::string& path, DaemonConfig* config);
// Cross-field checks (sizes fit each other, TTLs ordered, log level known,
// listen addresses well formed with ports in 0..65535). Pure; the checks
// against this machine (directories, memory) are ValidateConfigForHost in
// server/config_validation.h.
absl::Status ValidateConfig(const DaemonConfig& config);
// The configuration as YAML, every key present; ApplyYaml reads it back.
std::string ConfigToYaml(const DaemonConfig& config);
// Every key, for help text.
std::vector<std::string> ConfigKeys();

// "8GiB" -> 8589934592. INVALID_ARGUMENT on junk or overflow.
absl::StatusOr<uint64_t> ParseBytes(absl::string_view text);

}  // namespace kvtier

#endif  // KVTIER_SERVER_CONFIG_H_
