#include "client/cpp/channel.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/client_interceptor.h>

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kvtier {
namespace {

// Adds "authorization: Bearer <token>" to every call of the channel.
class BearerToken final : public grpc::experimental::Interceptor {
 public:
  explicit BearerToken(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *header_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;
};

class BearerTokenFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerToken(&header_);
  }

 private:
  const std::string header_;
};

}  // namespace

std::string StatusCodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return (i >= 0 && i < 17) ? kNames[i] : absl::StrCat(i);
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad())
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " '", path, "'"));
  return text.str();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const char* what) {
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, what));
  std::string token(absl::StripAsciiWhitespace(text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is empty"));
  }
  return token;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const std::string& target,
                                                           const Credentials& credentials,
                                                           grpc::ChannelArguments args) {
  std::shared_ptr<grpc::ChannelCredentials> transport;
  if (credentials.tls_cert_file.empty() != credentials.tls_key_file.empty()) {
    return absl::InvalidArgumentError("a client certificate needs both its file and its key");
  }
  if (credentials.tls_ca_file.empty()) {
    if (!credentials.tls_cert_file.empty()) {
      return absl::InvalidArgumentError(
          "a client certificate needs TLS: give the CA of the daemon's certificate too");
    }
    transport = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ASSIGN_OR_RETURN(std::string ca, ReadSmallFile(credentials.tls_ca_file, "TLS CA file"));
    ssl.pem_root_certs = std::move(ca);
    if (!credentials.tls_cert_file.empty()) {
      ASSIGN_OR_RETURN(std::string cert,
                       ReadSmallFile(credentials.tls_cert_file, "TLS certificate file"));
      ASSIGN_OR_RETURN(std::string key, ReadSmallFile(credentials.tls_key_file, "TLS key file"));
      ssl.pem_cert_chain = std::move(cert);
      ssl.pem_private_key = std::move(key);
    }
    transport = grpc::SslCredentials(ssl);
    if (!credentials.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(credentials.tls_server_name);
    }
  }
  for (char c : credentials.token) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          "the token holds a space or a non-printable character (a stray newline in its file?)");
    }
  }
  if (credentials.token.empty()) return grpc::CreateCustomChannel(target, transport, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> token;
  token.push_back(std::make_unique<BearerTokenFactory>(credentials.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, transport, args,
                                                                 std::move(token));
}

}  // namespace kvtier
