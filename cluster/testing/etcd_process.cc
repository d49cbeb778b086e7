#include "cluster/testing/etcd_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cluster/etcd_gateway_client.h"

namespace kvtier {
namespace {

// A loopback port nobody listens on now (the kernel's pick for port 0).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace

std::string EtcdProcess::Binary() {
  const char* from_env = getenv("KVTIER_ETCD");
  for (const char* candidate : {from_env, static_cast<const char*>("/usr/bin/etcd")}) {
    if (candidate != nullptr && access(candidate, X_OK) == 0) return candidate;
  }
  return "";
}

absl::StatusOr<std::unique_ptr<EtcdProcess>> EtcdProcess::Start() {
  if (Binary().empty()) return absl::FailedPreconditionError("no etcd binary");
  std::unique_ptr<EtcdProcess> etcd(new EtcdProcess());
  char tmpl[] = "/tmp/kvtier-etcd-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp failed");
  etcd->dir_ = tmpl;
  etcd->endpoint_ = absl::StrCat("http://127.0.0.1:", FreePort());
  etcd->peer_url_ = absl::StrCat("http://127.0.0.1:", FreePort());
  if (absl::Status s = etcd->Launch(); !s.ok()) return s;
  return etcd;
}

absl::Status EtcdProcess::Launch() {
  const std::string binary = Binary();
  std::vector<std::string> args = {binary,
                                   "--name=kvtier-test",
                                   absl::StrCat("--data-dir=", dir_, "/data"),
                                   absl::StrCat("--listen-client-urls=", endpoint_),
                                   absl::StrCat("--advertise-client-urls=", endpoint_),
                                   absl::StrCat("--listen-peer-urls=", peer_url_),
                                   absl::StrCat("--initial-advertise-peer-urls=", peer_url_),
                                   absl::StrCat("--initial-cluster=kvtier-test=", peer_url_),
                                   "--log-level=error"};
  const std::string log = absl::StrCat(dir_, "/etcd.log");
  // Everything the child needs is made before fork: after it, a child of a
  // threaded process may only call async-signal-safe functions.
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) return absl::InternalError("fork failed");
  if (pid_ == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  auto client = EtcdGatewayClient::Create({.endpoints = {endpoint_}, .timeout = absl::Seconds(1)});
  if (!client.ok()) return client.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    if ((*client)->GetPrefix("/").ok()) return absl::OkStatus();
    int wstatus = 0;
    if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(absl::StrCat("etcd exited at start; see ", log));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat("etcd did not answer in 20 s; see ", log));
}

void EtcdProcess::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

absl::Status EtcdProcess::Restart() {
  Stop();
  return Launch();
}

EtcdProcess::~EtcdProcess() {
  Stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace kvtier
