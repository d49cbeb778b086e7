// UcxTransport: the Transport over UCX's ucp layer. One ucp context and one
// worker per transport, driven by a progress thread that sleeps on the
// worker's event descriptor (so a target of remote puts and gets, which
// needs progress for TCP and shared-memory transports, uses no CPU while
// idle). Exposed memory is mapped once with ucp_mem_map and its rkey packed
// for peers; each connection is an endpoint with peer error handling plus the
// peer's unpacked rkey.
//
// Transports come from UCX's environment (UCX_TLS, UCX_NET_DEVICES), read at
// Create; Create's `net_devices` takes precedence over UCX_NET_DEVICES. Endpoints always use peer
// error handling: it is what lets a deadline cancel operations in flight (UCX refuses a forced
// close without it), at the price that UCX 1.13 then moves bytes between two processes only over
// transports that can report a dead peer (tcp and RDMA, not its shared memory transports). GPU
// memory support is detected from the context's memory types.
//
// Thread-safety: as Transport. Operations may be issued from any thread (the
// worker runs in UCS_THREAD_MODE_MULTI); completions run on the progress
// thread.
#ifndef KVTIER_TRANSFER_UCX_UCX_TRANSPORT_H_
#define KVTIER_TRANSFER_UCX_UCX_TRANSPORT_H_

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "transfer/transport.h"

namespace kvtier {

class UcxTransport final : public Transport {
 public:
  // UNAVAILABLE when UCX cannot initialize (no usable transport).
  // `net_devices` non-empty overrides UCX_NET_DEVICES: the worker then opens
  // interfaces (and TCP listening sockets) on those devices only.
  static absl::StatusOr<std::unique_ptr<UcxTransport>> Create(const std::string& net_devices = "");
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  TransportCapabilities Capabilities() const override { return capabilities_; }
  std::string LocalAddress() const override { return address_; }
  absl::StatusOr<ExposedMemory> Expose(absl::Span<uint8_t> memory) override;
  absl::StatusOr<uint64_t> Connect(absl::string_view peer_address,
                                   const ExposedMemory& remote) override;
  void Disconnect(uint64_t connection) override;
  std::vector<absl::Status> Execute(uint64_t connection, RmaKind kind, absl::Span<const RmaOp> ops,
                                    absl::Time deadline) override;
  ConnectionInfo Describe(uint64_t connection) override;

 private:
  struct Connection;
  struct Batch;

  UcxTransport() = default;
  void ProgressLoop();
  std::shared_ptr<Connection> Find(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // Force-closes the connection's endpoint (failing its in-flight requests)
  // and waits for the close to finish.
  void Close(const std::shared_ptr<Connection>& conn, const std::string& why)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Wake();
  // Waits for a UCX request to leave UCS_INPROGRESS, or for `deadline`;
  // returns its status (UCS_INPROGRESS at the deadline).
  ucs_status_t AwaitRequest(void* request, absl::Time deadline);
  // Flushes a new endpoint, which completes its wire-up (bounded).
  absl::Status WaitForWireUp(Connection& conn);
  // Lets queued wire-up traffic drain before the worker goes (bounded).
  void Quiesce();

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  int epoll_fd_ = -1;
  std::string address_;
  TransportCapabilities capabilities_;
  std::atomic<bool> stop_{false};
  std::thread progress_;

  Mutex mu_;
  ucp_mem_h exposed_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<ucp_mem_h> retired_ ABSL_GUARDED_BY(mu_);  // replaced exposures
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  // Connections whose endpoint UCX refused to close (not expected with peer
  // error handling): kept alive, since UCX may still call back with them.
  std::vector<std::shared_ptr<Connection>> unclosed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_UCX_UCX_TRANSPORT_H_
