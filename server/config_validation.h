// Checks of a DaemonConfig that go beyond its own fields: the address
// syntax, the files it names, and whether it fits this machine. kvtierd runs
// them before it starts anything (server/main.cc); a refusal names the key
// and the reason, and the daemon exits 2 (docs/operations.md, "What the
// daemon refuses at start"). The TLS checks (ValidateTlsPem) run as the
// daemon starts its server, where a failure exits 1.
//
// Thread-safety: stateless functions. ValidateListenAddress is pure; the
// others read the filesystem.
#ifndef KVTIER_SERVER_CONFIG_VALIDATION_H_
#define KVTIER_SERVER_CONFIG_VALIDATION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/config.h"

namespace kvtier {

// The largest config, certificate or key file kvtierd reads (1 MiB).
inline constexpr uint64_t kMaxConfigFileBytes = uint64_t{1} << 20;

// "host:port" (port 0..65535, host non-empty, an IPv6 host in brackets:
// "[::1]:5000"); with `allow_unix`, also "unix:/path" and
// "unix-abstract:name". INVALID_ARGUMENT naming `key` otherwise.
absl::Status ValidateListenAddress(absl::string_view key, absl::string_view address,
                                   bool allow_unix);

// The cluster.* keys: lease_ttl_ms whole seconds in 2000..60000,
// etcd_timeout_ms in 1..lease_ttl_ms/3 (a round of three etcd calls fits
// one beat), cluster.name a valid id; when cluster.etcd is set, each
// endpoint "host:port" or "http://host:port", node_id (if set) a valid id,
// and an address peers can dial: cluster.advertise "host:port" with a real
// host and port, or server.listen a "host:port" on a specific host.
absl::Status ValidateClusterConfig(const DaemonConfig& config);
// events.*: ZeroMQ endpoints (tcp://, ipc://), a replay endpoint only with
// a publishing one, hashes int or bytes, a replay buffer of 1..1000000
// messages.
absl::Status ValidateEventsConfig(const DaemonConfig& config);

// Reads the file a setting names (`what`: "--config", "security.tls_cert",
// ...). Refuses, before reading, anything but a regular file (directories,
// devices such as /dev/zero, FIFOs, sockets) and files over `max_bytes`.
// NOT_FOUND when it cannot be opened, INVALID_ARGUMENT otherwise.
absl::StatusOr<std::string> ReadBoundedFile(const std::string& path, absl::string_view what,
                                            uint64_t max_bytes = kMaxConfigFileBytes);

// ReadBoundedFile for a certificate or key file that setting `key` names
// (security.tls_cert, ...): every failure is INVALID_ARGUMENT (a missing file
// included), naming the key.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view key);

// Checks against this machine, given its physical memory:
//   nvme.dirs names no directory twice (same text after normalisation, same
//     real path, or the same st_dev + st_ino: symlinks and bind mounts);
//   host_tier.bytes does not exceed `physical_memory_bytes`;
//   server.shm_dir is an existing directory on tmpfs or hugetlbfs (unless
//     limits.max_regions is 0: no shared-memory registration at all).
absl::Status ValidateConfigForHost(const DaemonConfig& config, uint64_t physical_memory_bytes);

// The TLS files, read: `cert_pem` holds at least one PEM certificate,
// `key_pem` a PEM private key (unencrypted) matching the first certificate,
// and `client_ca_pem` (when `config.tls_client_ca` is set) at least one PEM
// certificate. INVALID_ARGUMENT naming the key and file otherwise.
absl::Status ValidateTlsPem(const DaemonConfig& config, const std::string& cert_pem,
                            const std::string& key_pem, const std::string& client_ca_pem);

}  // namespace kvtier

#endif  // KVTIER_SERVER_CONFIG_VALIDATION_H_
