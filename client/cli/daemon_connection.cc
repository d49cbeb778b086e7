#include "client/cli/daemon_connection.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "absl/strings/ascii.h"
#include "client/cpp/channel.h"
#include "google/protobuf/util/json_util.h"

namespace kvtier {
namespace {

constexpr int kMaxMessageBytes = 64 << 20;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

void AddGlobalFlags(CLI::App& app, Globals* g) {
  if (std::string env = Env("KVTIER_ADDR"); !env.empty()) g->addr = env;
  g->credentials.token = Env("KVTIER_TOKEN");
  g->token_file = Env("KVTIER_TOKEN_FILE");
  g->credentials.tls_ca_file = Env("KVTIER_TLS_CA");
  g->credentials.tls_cert_file = Env("KVTIER_TLS_CERT");
  g->credentials.tls_key_file = Env("KVTIER_TLS_KEY");
  g->credentials.tls_server_name = Env("KVTIER_TLS_SERVER_NAME");
  app.add_option("--addr", g->addr, "daemon address, host:port or unix:/path (env KVTIER_ADDR)")
      ->capture_default_str();
  app.add_flag("--json", g->json, "machine-readable output");
  app.add_option("--timeout", g->timeout_s, "seconds to wait for each call")->capture_default_str();
  app.add_option("--tls-ca", g->credentials.tls_ca_file,
                 "use TLS: PEM CA of the daemon's certificate (env KVTIER_TLS_CA)");
  app.add_option("--tls-cert", g->credentials.tls_cert_file,
                 "client certificate (PEM) for mutual TLS");
  app.add_option("--tls-key", g->credentials.tls_key_file, "its private key (PEM)");
  app.add_option("--tls-server-name", g->credentials.tls_server_name,
                 "name to check the daemon's certificate against (default: the address's host)");
  app.add_option("--token-file", g->token_file,
                 "file holding the bearer token (env KVTIER_TOKEN_FILE; or env KVTIER_TOKEN)");
}

int ResolveGlobals(Globals* g) {
  if (!g->token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(g->token_file, "token file");
    if (!token.ok()) return LocalError(std::string(token.status().message()));
    g->credentials.token = *std::move(token);
  }
  return 0;
}

std::shared_ptr<grpc::Channel> Connect(const Globals& g) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = OpenChannel(g.addr, g.credentials, args);
  if (!channel.ok()) {
    LocalError(std::string(channel.status().message()));
    return nullptr;
  }
  return *std::move(channel);
}

void SetDeadline(const Globals& g, grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(g.timeout_s * 1000)));
}

std::unique_ptr<client::Client> ConnectClient(const Globals& g) {
  client::ClientOptions options;
  options.timeout = absl::Milliseconds(static_cast<int64_t>(g.timeout_s * 1000));
  options.max_message_bytes = kMaxMessageBytes;
  options.credentials = g.credentials;
  absl::StatusOr<std::unique_ptr<client::Client>> c = client::Client::Connect(g.addr, options);
  if (!c.ok()) {
    LocalError(std::string(c.status().message()));
    return nullptr;
  }
  return *std::move(c);
}

int RpcFailed(const Globals& g, const char* what, const absl::Status& s) {
  return RpcFailed(g, what,
                   grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message())));
}

int RpcFailed(const Globals& g, const char* what, const grpc::Status& s) {
  std::fprintf(stderr, "kvtier: %s on %s failed: %s: %s\n", what, g.addr.c_str(),
               StatusCodeName(s.error_code()).c_str(), s.error_message().c_str());
  return 1;
}

int LocalError(const std::string& message) {
  std::fprintf(stderr, "kvtier: %s\n", message.c_str());
  return 2;
}

void PrintJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  std::cout << out;
}

std::string HumanBytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

ProgressBar::ProgressBar(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(uint64_t done, uint64_t total, const std::string& unit) {
  if (!enabled_) return;
  constexpr int kWidth = 30;
  const double frac = total == 0 ? 1.0 : std::min(1.0, static_cast<double>(done) / total);
  const int filled = static_cast<int>(frac * kWidth);
  std::fprintf(stderr, "\r%s [%s%s] %3.0f%% %llu/%llu %s", label_.c_str(),
               std::string(filled, '#').c_str(), std::string(kWidth - filled, ' ').c_str(),
               frac * 100, static_cast<unsigned long long>(done),
               static_cast<unsigned long long>(total), unit.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Finish() {
  if (drawn_) std::fputc('\n', stderr);
  drawn_ = false;
}

static bool Unhex(const std::string& hex, std::string* out) {
  if (hex.empty() || hex.size() % 2 != 0 || hex.size() > 64) return false;
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    auto nib = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int hi = nib(hex[i]), lo = nib(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

// Block keys from the command line; 0 or the exit status (2).
int UnhexKeys(const std::vector<std::string>& hex_keys, std::vector<std::string>* keys) {
  for (const std::string& h : hex_keys) {
    std::string key;
    if (!Unhex(h, &key)) return LocalError("'" + h + "' is not a hex key of 1..32 bytes");
    keys->push_back(std::move(key));
  }
  return 0;
}

}  // namespace kvtier
