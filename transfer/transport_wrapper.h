// TransportWrapper: a Transport that forwards every call to the Transport it
// owns, the base for decorators that change only some calls (the fault
// injector in testing/, the tests' cutting transport), in the manner of
// RocksDB's FileSystemWrapper and leveldb's EnvWrapper: a decorator
// overrides what it changes and calls target() for the rest, and a method
// added to Transport is forwarded here once rather than in every decorator.
//
// Thread-safety: as thread-safe as its target.
#ifndef KVTIER_TRANSFER_TRANSPORT_WRAPPER_H_
#define KVTIER_TRANSFER_TRANSPORT_WRAPPER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transfer/transport.h"

namespace kvtier {

class TransportWrapper : public Transport {
 public:
  explicit TransportWrapper(std::unique_ptr<Transport> target) : target_(std::move(target)) {}

  Transport* target() const { return target_.get(); }

  TransportCapabilities Capabilities() const override { return target_->Capabilities(); }
  std::string LocalAddress() const override { return target_->LocalAddress(); }
  absl::StatusOr<ExposedMemory> Expose(absl::Span<uint8_t> memory) override {
    return target_->Expose(memory);
  }
  absl::StatusOr<uint64_t> Connect(absl::string_view peer_address,
                                   const ExposedMemory& remote) override {
    return target_->Connect(peer_address, remote);
  }
  void Disconnect(uint64_t connection) override { target_->Disconnect(connection); }
  std::vector<absl::Status> Execute(uint64_t connection, RmaKind kind, absl::Span<const RmaOp> ops,
                                    absl::Time deadline) override {
    return target_->Execute(connection, kind, ops, deadline);
  }
  ConnectionInfo Describe(uint64_t connection) override { return target_->Describe(connection); }

 private:
  const std::unique_ptr<Transport> target_;
};

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_TRANSPORT_WRAPPER_H_
