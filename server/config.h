// DaemonConfig: every setting of kvtierd, with its embedded default, its YAML
// key and its flag. Precedence: embedded defaults < YAML file (--config) <
// flags (--set KEY=VALUE and the named shortcuts). Unknown keys are errors
// that name the key.
//
// YAML layout (every key optional):
//   server:    listen, max_message_bytes, get_chunk_bytes, shutdown_grace_ms
//   host_tier: bytes, slab_bytes
//   limits:    max_block_bytes, max_namespaces, max_keys_per_request, max_leases
//   leases:    default_ttl_ms, max_ttl_ms
//   log:       level
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

  uint64_t host_tier_bytes = 0;  // set by DefaultConfig from RAM
  uint64_t host_slab_bytes = uint64_t{64} << 20;

  uint64_t max_block_bytes = uint64_t{64} << 20;
  uint32_t max_namespaces = 1024;
  uint32_t max_keys_per_request = 65536;
  uint32_t max_leases = 1 << 20;

  uint32_t default_lease_ttl_ms = 30'000;
  uint32_t max_lease_ttl_ms = 600'000;

  std::string log_level = "info";
};

// The embedded defaults. The host tier gets min(25% of physical memory,
// 8 GiB), rounded down to whole slabs (at least one slab).
DaemonConfig DefaultConfig(uint64_t physical_memory_bytes);
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
// Reads and applies a YAML file; NOT_FOUND if it cannot be read.
absl::Status ApplyYamlFile(const std::string& path, DaemonConfig* config);
// Cross-field checks (sizes fit each other, TTLs ordered, log level known).
absl::Status ValidateConfig(const DaemonConfig& config);
// The configuration as YAML, every key present; ApplyYaml reads it back.
std::string ConfigToYaml(const DaemonConfig& config);
// Every key, for help text.
std::vector<std::string> ConfigKeys();

// "8GiB" -> 8589934592. INVALID_ARGUMENT on junk or overflow.
absl::StatusOr<uint64_t> ParseBytes(absl::string_view text);

}  // namespace kvtier

#endif  // KVTIER_SERVER_CONFIG_H_
