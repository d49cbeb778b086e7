// OpenChannel: a gRPC channel to kvtierd carrying Credentials (TLS or mutual
// TLS from PEM files, and a bearer token added to every call by a client
// interceptor, so that it works over plain connections on loopback too).
// Shared by the client library, the kvtier CLI and the daemon's calls to its
// peers.
//
// Thread-safety: a pure function; the channel is thread-safe.
#ifndef KVTIER_CLIENT_CPP_CHANNEL_H_
#define KVTIER_CLIENT_CPP_CHANNEL_H_

#include <grpcpp/channel.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kvtier/credentials.h"

namespace kvtier {

// INVALID_ARGUMENT when a PEM file cannot be read or only one of the client
// certificate and key is given.
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const std::string& target,
                                                           const Credentials& credentials,
                                                           grpc::ChannelArguments args = {});

// "OK", "NOT_FOUND", ... (the number for a code gRPC does not define).
std::string StatusCodeName(grpc::StatusCode code);

// A bearer token from a file: its content without surrounding whitespace.
// INVALID_ARGUMENT naming the file when it cannot be read or is empty.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const char* what);

// Reads a whole (small) file, e.g. a PEM file or a token file; surrounding
// whitespace is kept. INVALID_ARGUMENT naming the file when it cannot be read.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, const char* what);

}  // namespace kvtier

#endif  // KVTIER_CLIENT_CPP_CHANNEL_H_
