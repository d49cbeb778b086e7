// Authenticator: who a caller is (an Identity: name, tenant, role) from the
// credential it presented, a bearer token or the subject (common name) of a
// verified client certificate, and what each role may call.
//
// Authentication is off when no identities file is configured: every caller
// is then the anonymous admin of tenant "" (a single-tenant deployment). When
// it is on, a call without a known credential is UNAUTHENTICATED and a known
// caller outside its role is PERMISSION_DENIED.
//
// The identities file (YAML):
//   identities:
//     - name: engine-a          # for logs and metrics
//       token_sha256: 9f86d0... # SHA-256 of the token, hex (or token: plain)
//       tenant: alpha           # [A-Za-z0-9._-]{1,64}
//       role: tenant            # tenant (default) | peer | admin
//     - name: decode-daemon
//       subject: kvtierd-decode # client certificate common name (mutual TLS)
//       role: peer
//
// This file knows nothing of gRPC (server/grpc_auth.h reads credentials off a
// call).
//
// Thread-safety: immutable after Create; all methods are const.
#ifndef KVTIER_SERVER_AUTH_H_
#define KVTIER_SERVER_AUTH_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "server/log_rate_limiter.h"

namespace kvtier {

// What a caller may do. kTenant: the KvCache service, in its tenant's
// namespaces. kPeer: the Peer service (another daemon). kAdmin: everything
// (KvCache only with a tenant).
enum class Role { kTenant, kPeer, kAdmin };
absl::string_view RoleName(Role role);

struct Identity {
  std::string name;
  std::string tenant;  // "" = none (may not use KvCache when auth is on)
  Role role = Role::kTenant;
  // The caller of a daemon without authentication (tenant "" then is the
  // single tenant, not "none").
  bool anonymous = false;
};

class Authenticator {
 public:
  // Authentication off: everyone is the anonymous admin of tenant "".
  static std::unique_ptr<Authenticator> Open();
  // From the YAML text of an identities file. INVALID_ARGUMENT naming the
  // entry for a bad file (unknown role, bad tenant name, an entry with no
  // credential or two entries with the same credential).
  static absl::StatusOr<std::unique_ptr<Authenticator>> FromYaml(absl::string_view yaml);
  // Reads `path`. FAILED_PRECONDITION when the file can be read by group or
  // others (it holds tokens), NOT_FOUND when it cannot be read.
  static absl::StatusOr<std::unique_ptr<Authenticator>> FromFile(const std::string& path);

  bool enabled() const { return enabled_; }
  size_t size() const { return by_token_.size() + by_subject_.size(); }
  // Distinct tenants the identities name (0 with authentication off).
  size_t tenants() const;

  // The caller presenting `token` (empty = none) and, when its connection
  // carried a verified client certificate, `subject`. A token that is given
  // decides alone: an unknown one is UNAUTHENTICATED even with a known
  // certificate.
  absl::StatusOr<Identity> Identify(absl::string_view token,
                                    std::optional<absl::string_view> subject) const;

  // OK when `who` may call a method that needs `needed`; PERMISSION_DENIED
  // naming the caller and the role otherwise. KvCache calls (kTenant) also
  // need a tenant.
  static absl::Status Authorize(const Identity& who, Role needed);

  // The refusals of this daemon's calls, for the log: one line per reason
  // every 10 s, each refusal counted (thread-safe).
  LogRateLimiter& refusal_log() const { return *refusal_log_; }

 private:
  Authenticator() = default;
  SystemClock clock_;
  const std::unique_ptr<LogRateLimiter> refusal_log_ =
      std::make_unique<LogRateLimiter>(absl::Seconds(10), &clock_);
  bool enabled_ = false;
  // Keyed by the SHA-256 of the token (hex): a lookup by the hash of what
  // was presented does not compare secrets byte by byte.
  absl::flat_hash_map<std::string, Identity> by_token_;
  absl::flat_hash_map<std::string, Identity> by_subject_;
};

// SHA-256 of `text` as 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view text);

// Tenant names: 1..64 of [A-Za-z0-9._-], not starting with '.' (a tenant
// names a directory), except "none", "other" and "unauthenticated" (metric
// label values of their own).
bool ValidTenantName(absl::string_view tenant);

}  // namespace kvtier

#endif  // KVTIER_SERVER_AUTH_H_
