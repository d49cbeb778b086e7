// How the kvtier CLI reaches kvtierd: the global flags (address, output
// format, timeout, TLS and token), the channel they describe, and the
// reporting every command shares (RPC failures, JSON output, byte sizes).
//
// Thread-safety: value types and free functions.
#ifndef KVTIER_CLIENT_CLI_DAEMON_CONNECTION_H_
#define KVTIER_CLIENT_CLI_DAEMON_CONNECTION_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "kvtier/client.h"
#include "kvtier/credentials.h"
#include "kvtier/v1/admin.grpc.pb.h"

namespace kvtier {

struct Globals {
  std::string addr = "127.0.0.1:50051";
  bool json = false;
  double timeout_s = 30;
  Credentials credentials;
  std::string token_file;  // read into credentials.token by Resolve
};

// Adds --addr, --json, --timeout, --tls-ca, --tls-cert, --tls-key,
// --tls-server-name, --token-file (environment: KVTIER_ADDR, KVTIER_TOKEN,
// KVTIER_TOKEN_FILE, KVTIER_TLS_CA, KVTIER_TLS_CERT, KVTIER_TLS_KEY,
// KVTIER_TLS_SERVER_NAME).
void AddGlobalFlags(CLI::App& app, Globals* g);
// After parsing: reads the token file. Returns 0 or the exit status (2).
int ResolveGlobals(Globals* g);

// The channel to the daemon; nullptr after printing why (bad TLS files).
std::shared_ptr<grpc::Channel> Connect(const Globals& g);
void SetDeadline(const Globals& g, grpc::ClientContext* ctx);
// The client library on the same address, credentials, timeout and message
// limit; nullptr after printing why (returns: exit status 2).
std::unique_ptr<client::Client> ConnectClient(const Globals& g);

// Prints "kvtier: WHAT on ADDR failed: CODE: message"; returns 1.
int RpcFailed(const Globals& g, const char* what, const grpc::Status& s);
// The same for a client library call (its codes are gRPC's).
int RpcFailed(const Globals& g, const char* what, const absl::Status& s);
// Prints "kvtier: message"; returns 2.
int LocalError(const std::string& message);
void PrintJson(const google::protobuf::Message& m);
std::string HumanBytes(uint64_t bytes);
// Block keys given in hex on the command line (1..32 bytes each) into
// `keys`; 0, or the exit status (2) after saying which is bad.
int UnhexKeys(const std::vector<std::string>& hex_keys, std::vector<std::string>* keys);

// Calls one Admin RPC. Returns 0 and fills `response`, or the exit status.
// With --json it also prints the response and sets *printed.
template <typename Request, typename Response>
int CallAdmin(const Globals& g, const char* name,
              grpc::Status (v1::Admin::Stub::*rpc)(grpc::ClientContext*, const Request&, Response*),
              Response* response, bool* printed) {
  auto stub = v1::Admin::NewStub(Connect(g));
  grpc::ClientContext ctx;
  SetDeadline(g, &ctx);
  grpc::Status s = (stub.get()->*rpc)(&ctx, Request(), response);
  if (!s.ok()) return RpcFailed(g, name, s);
  *printed = g.json;
  if (g.json) PrintJson(*response);
  return 0;
}

// A progress bar on stderr for long operations ("evict  [#####    ] 52%
// 1200/2300 blocks"); silent when stderr is not a terminal unless forced.
class ProgressBar {
 public:
  ProgressBar(std::string label, bool enabled);
  ~ProgressBar();
  void Update(uint64_t done, uint64_t total, const std::string& unit);
  void Finish();

 private:
  const std::string label_;
  const bool enabled_;
  bool drawn_ = false;
};

}  // namespace kvtier

#endif  // KVTIER_CLIENT_CLI_DAEMON_CONNECTION_H_
