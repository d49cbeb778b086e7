// EtcdProcess: a real etcd server for tests, on free loopback ports with a
// fresh data directory; stopped (SIGTERM, then SIGKILL) and its directory
// removed on destruction. Stop() and Restart() let a test take etcd away
// and bring it back with its data.
//
// Thread-safety: not thread-safe; owned by one test.
#ifndef KVTIER_CLUSTER_TESTING_ETCD_PROCESS_H_
#define KVTIER_CLUSTER_TESTING_ETCD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kvtier {

class EtcdProcess {
 public:
  // The etcd binary: $KVTIER_ETCD, else /usr/bin/etcd; "" when neither
  // exists (tests skip, saying scripts/install-deps installs etcd-server).
  static std::string Binary();
  // Starts etcd and waits (up to 20 s) until it answers /health.
  static absl::StatusOr<std::unique_ptr<EtcdProcess>> Start();
  ~EtcdProcess();

  // "http://127.0.0.1:<port>".
  const std::string& endpoint() const { return endpoint_; }
  // Kills etcd (SIGKILL) and waits for it to exit; the data is kept.
  void Stop();
  // Starts it again on the same ports and data.
  absl::Status Restart();

 private:
  EtcdProcess() = default;
  absl::Status Launch();

  std::string dir_;
  std::string endpoint_;
  std::string peer_url_;
  pid_t pid_ = -1;
};

}  // namespace kvtier

#endif  // KVTIER_CLUSTER_TESTING_ETCD_PROCESS_H_
