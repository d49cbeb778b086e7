// LoopbackTransport: a Transport for tests and fuzzing within one process.
// Every instance in the process shares the address space, so a "remote"
// put or get is a memcpy between the local buffer and the peer's exposed
// range, checked against that range exactly as a real backend must.
//
// Thread-safety: thread-safe.
#ifndef KVTIER_TESTING_LOOPBACK_TRANSPORT_H_
#define KVTIER_TESTING_LOOPBACK_TRANSPORT_H_

#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "transfer/transport.h"

namespace kvtier {

class LoopbackTransport final : public Transport {
 public:
  TransportCapabilities Capabilities() const override {
    return {"loopback", "memcpy", true, false, "in-process memcpy", ""};
  }
  std::string LocalAddress() const override { return absl::StrCat("loopback:", id_); }
  absl::StatusOr<ExposedMemory> Expose(absl::Span<uint8_t> memory) override {
    if (memory.empty()) return absl::InvalidArgumentError("cannot expose an empty memory range");
    return ExposedMemory{reinterpret_cast<uint64_t>(memory.data()), memory.size(), "loopback"};
  }
  absl::StatusOr<uint64_t> Connect(absl::string_view peer_address,
                                   const ExposedMemory& remote) override {
    if (peer_address.substr(0, 9) != "loopback:" || remote.remote_key != "loopback" ||
        remote.size == 0 || remote.base + remote.size < remote.base) {
      return absl::InvalidArgumentError("not a loopback peer");
    }
    MutexLock lock(&mu_);
    connections_[next_] = remote;
    return next_++;
  }
  void Disconnect(uint64_t connection) override {
    MutexLock lock(&mu_);
    connections_.erase(connection);
  }
  std::vector<absl::Status> Execute(uint64_t connection, RmaKind kind, absl::Span<const RmaOp> ops,
                                    absl::Time) override {
    std::vector<absl::Status> out(ops.size());
    ExposedMemory r;
    {
      MutexLock lock(&mu_);
      auto it = connections_.find(connection);
      if (it == connections_.end()) {
        for (auto& s : out) s = absl::UnavailableError("no such peer connection");
        return out;
      }
      r = it->second;
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      const RmaOp& op = ops[i];
      if (op.remote_address < r.base || op.bytes > r.size ||
          op.remote_address - r.base > r.size - op.bytes || (op.local == nullptr && op.bytes)) {
        out[i] = absl::InvalidArgumentError("remote range leaves the peer's exposed memory");
        continue;
      }
      auto* remote = reinterpret_cast<uint8_t*>(op.remote_address);
      if (kind == RmaKind::kPut) {
        std::memmove(remote, op.local, op.bytes);
      } else {
        std::memmove(op.local, remote, op.bytes);
      }
    }
    return out;
  }
  ConnectionInfo Describe(uint64_t connection) override {
    MutexLock lock(&mu_);
    return {"loopback", connections_.contains(connection), ""};
  }

 private:
  const uint64_t id_ = reinterpret_cast<uint64_t>(this);
  Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, ExposedMemory> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_TESTING_LOOPBACK_TRANSPORT_H_
