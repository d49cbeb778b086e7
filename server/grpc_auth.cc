#include "server/grpc_auth.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "base/status_macros.h"
#include "client/cpp/channel.h"
#include "server/config_validation.h"
#include "server/log_rate_limiter.h"
#include "spdlog/spdlog.h"

namespace kvtier {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const DaemonConfig& config) {
  if (config.tls_cert.empty()) return grpc::InsecureServerCredentials();
  ASSIGN_OR_RETURN(std::string cert, ReadPemFile(config.tls_cert, "security.tls_cert"));
  ASSIGN_OR_RETURN(std::string key, ReadPemFile(config.tls_key, "security.tls_key"));
  // gRPC would only fail at bind time, as "cannot listen": say which file is wrong.
  std::string client_ca;
  if (!config.tls_client_ca.empty()) {
    ASSIGN_OR_RETURN(std::string ca, ReadPemFile(config.tls_client_ca, "security.tls_client_ca"));
    client_ca = std::move(ca);
  }
  RETURN_IF_ERROR(ValidateTlsPem(config, cert, key, client_ca));
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  ssl.pem_key_cert_pairs.push_back({std::move(key), std::move(cert)});
  if (!config.tls_client_ca.empty()) {
    ssl.pem_root_certs = std::move(client_ca);
    // With identities, a certificate is one credential among others (a
    // caller may present a token instead), and one that is missing is
    // refused per call with UNAUTHENTICATED. Without identities, the
    // certificate is the only gate: the handshake requires it.
    ssl.client_certificate_request =
        config.identities_file.empty() ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                       : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::unique_ptr<Authenticator>> AuthenticatorFor(const DaemonConfig& config) {
  if (config.identities_file.empty()) return Authenticator::Open();
  return Authenticator::FromFile(config.identities_file);
}

absl::StatusOr<Credentials> PeerCredentialsFor(const DaemonConfig& config) {
  Credentials c;
  if (!config.peer_tls_ca.empty()) {
    c.tls_ca_file = config.peer_tls_ca;
    c.tls_cert_file = config.tls_cert;
    c.tls_key_file = config.tls_key;
  }
  if (!config.peer_token_file.empty()) {
    ASSIGN_OR_RETURN(std::string token,
                     ReadTokenFile(config.peer_token_file, "security.peer_token_file"));
    c.token = std::move(token);
  }
  return c;
}

absl::StatusOr<Identity> CallerOf(const Authenticator& auth,
                                  const grpc::ServerContextBase& context) {
  if (!auth.enabled()) return auth.Identify("", std::nullopt);
  std::string token;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    const absl::string_view value(it->second.data(), it->second.size());
    if (!absl::StartsWithIgnoreCase(value, "bearer ")) {
      return absl::UnauthenticatedError("authorization metadata is not 'Bearer <token>'");
    }
    token = std::string(absl::StripAsciiWhitespace(value.substr(7)));
    if (token.empty()) return absl::UnauthenticatedError("empty bearer token");
  }
  std::optional<std::string> subject;
  if (std::shared_ptr<const grpc::AuthContext> ac = context.auth_context();
      ac != nullptr && ac->IsPeerAuthenticated()) {
    std::vector<grpc::string_ref> cn = ac->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
    if (!cn.empty()) subject = std::string(cn.front().data(), cn.front().size());
  }
  if (subject.has_value()) return auth.Identify(token, absl::string_view(*subject));
  return auth.Identify(token, std::nullopt);
}

namespace {

// A client retrying a refused call in a loop writes one line per reason
// every 10 s, not one per call (the calls themselves are all counted, by
// code, in kvtier_rpc_requests_total, and by reason in RefusalCount).
void LogRefusal(const Authenticator& auth, const grpc::ServerContextBase& context,
                const absl::Status& why) {
  const std::string reason(why.message());
  const LogRateLimiter::Verdict v = auth.refusal_log().Record(reason);
  if (!v.log) return;
  if (v.suppressed == 0) {
    spdlog::warn("refused a call from {}: {}", context.peer(), reason);
  } else {
    spdlog::warn("refused a call from {}: {} ({} more suppressed)", context.peer(), reason,
                 v.suppressed);
  }
}

}  // namespace

uint64_t RefusalCount(const Authenticator& auth, absl::string_view reason) {
  return auth.refusal_log().Count(reason);
}

absl::StatusOr<Identity> Admit(const Authenticator& auth, const grpc::ServerContextBase& context,
                               Role needed) {
  absl::StatusOr<Identity> who = CallerOf(auth, context);
  if (!who.ok()) {
    LogRefusal(auth, context, who.status());
    return who.status();
  }
  if (absl::Status s = Authenticator::Authorize(*who, needed); !s.ok()) {
    LogRefusal(auth, context, s);
    return s;
  }
  return who;
}

grpc::Status AdmitRole(const Authenticator& auth, const grpc::ServerContextBase& context,
                       Role needed) {
  absl::StatusOr<Identity> who = Admit(auth, context, needed);
  if (who.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(who.status().code()),
                      std::string(who.status().message()));
}

}  // namespace kvtier
