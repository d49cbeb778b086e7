// Credentials: how a client proves who it is to kvtierd, and how it checks
// the daemon (see docs/operations.md#security).
//
// Thread-safety: value type.
#ifndef KVTIER_CREDENTIALS_H_
#define KVTIER_CREDENTIALS_H_

#include <string>

namespace kvtier {

struct Credentials {
  // TLS is used when tls_ca_file is set: the PEM CA bundle that signed the
  // daemon's certificate.
  std::string tls_ca_file;
  // Client certificate and key (PEM) for mutual TLS; both or neither.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Name to check the daemon's certificate against ("" = the host of the
  // address).
  std::string tls_server_name;
  // Bearer token sent with every call ("" = none).
  std::string token;
};

}  // namespace kvtier

#endif  // KVTIER_CREDENTIALS_H_
