// The gRPC edge of security: server credentials (TLS, mutual TLS) from the
// config, and the identity of a call (its bearer token or the common name of
// its verified client certificate) checked against a role.
//
// Thread-safety: thread-safe (the Authenticator's refusal log is the only
// state).
#ifndef KVTIER_SERVER_GRPC_AUTH_H_
#define KVTIER_SERVER_GRPC_AUTH_H_

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kvtier/credentials.h"
#include "server/auth.h"
#include "server/config.h"

namespace kvtier {

// Insecure credentials without security.tls_cert; TLS with it; mutual TLS
// with security.tls_client_ca (client certificates verified; required by the
// handshake unless identities are configured, which refuse a call without
// credentials themselves).
// INVALID_ARGUMENT naming a PEM file that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const DaemonConfig& config);

// The authenticator security.identities_file describes (an open one when unset).
absl::StatusOr<std::unique_ptr<Authenticator>> AuthenticatorFor(const DaemonConfig& config);

// What this daemon presents to its peers (security.peer_tls_ca,
// security.tls_cert/tls_key, security.peer_token_file).
absl::StatusOr<Credentials> PeerCredentialsFor(const DaemonConfig& config);

// Who is calling.
absl::StatusOr<Identity> CallerOf(const Authenticator& auth,
                                  const grpc::ServerContextBase& context);

// The caller, if it may call a method needing `needed`; else the
// UNAUTHENTICATED or PERMISSION_DENIED status to answer with, logged at most
// once per reason (the status message) every 10 s by `auth`'s refusal log;
// the line after a quiet spell says how many were suppressed.
absl::StatusOr<Identity> Admit(const Authenticator& auth, const grpc::ServerContextBase& context,
                               Role needed);

// Refusals by `auth` with the status message `reason`, logged or not.
uint64_t RefusalCount(const Authenticator& auth, absl::string_view reason);

// Admit for handlers that need only the verdict: OK, or the refusal as a
// gRPC status.
grpc::Status AdmitRole(const Authenticator& auth, const grpc::ServerContextBase& context,
                       Role needed);

}  // namespace kvtier

#endif  // KVTIER_SERVER_GRPC_AUTH_H_
