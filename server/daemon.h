// Daemon: one running kvtierd. Start builds the storage engine from a
// DaemonConfig, probes GPUs, and serves KvCache, Admin, grpc.health.v1.Health
// and server reflection on the configured address until Shutdown.
//
// Thread-safety: Shutdown and the accessors may be called from any thread.
#ifndef KVTIER_SERVER_DAEMON_H_
#define KVTIER_SERVER_DAEMON_H_

#include <grpcpp/server.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/mutex.h"
#include "cluster/cluster_tier.h"
#include "cluster/membership.h"
#include "datapath/copy_engine.h"
#include "datapath/copy_workers.h"
#include "datapath/gpu_tier.h"
#include "datapath/memory_region.h"
#include "events/block_event_bus.h"
#include "events/zmq_event_publisher.h"
#include "gpu/gpu_probe.h"
#include "server/admin_service.h"
#include "server/async/call_executor.h"
#include "server/auth.h"
#include "server/config.h"
#include "server/daemon_metrics.h"
#include "server/kvcache_service.h"
#include "server/lookup_planner.h"
#include "server/peer_service.h"
#include "storage/block_cache.h"
#include "transfer/peer_transfer.h"
#include "transfer/transport.h"

namespace kvtier {

// What a daemon gets from the machine, replaceable by tests (an Env-style
// seam): the copy engine, the CUDA IPC importer and the GPU tier. Left
// empty, Start uses gpu/CreateCopyEngine, gpu/OpenCudaIpcRegion and a
// DevicePool sized by gpu.tier.
struct DaemonSeams {
  std::unique_ptr<CopyEngine> copy_engine;
  CudaIpcOpener open_cuda_ipc;
  std::unique_ptr<GpuTier> gpu_tier;  // replaces the one gpu.tier would make
  // Replaces the peer transport peer.transport would create (e.g. a
  // fault-injecting one); ignored when peer.transport is off.
  std::unique_ptr<Transport> transport;
};

class Daemon {
 public:
  // INVALID_ARGUMENT for a bad config, UNAVAILABLE if the address cannot be
  // bound, RESOURCE_EXHAUSTED if the host arena cannot be mapped.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const DaemonConfig& config,
                                                       DaemonSeams seams = {});
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // The address actually bound ("127.0.0.1:41234" when port 0 was asked).
  const std::string& listen_address() const { return listen_address_; }
  const GpuInventory& gpus() const { return gpus_; }
  BlockCache& cache() { return *cache_; }
  LookupPlanner& planner() { return *planner_; }
  PeerTransfer& peer_transfer() { return *peer_transfer_; }
  // The Prometheus endpoint ("" when metrics.listen is off) and its content.
  const std::string& metrics_address() const { return metrics_->address(); }
  const DaemonMetrics& metrics() const { return *metrics_; }
  // Null when cluster.etcd is unset (and the tier also without a transport).
  const Membership* membership() const { return membership_.get(); }
  const ClusterTier* cluster_tier() const { return cluster_tier_.get(); }

  // Leaves the cluster (peers stop routing to this node at once), stops
  // accepting calls, lets in-flight calls finish for up to `grace`, then
  // cancels the rest. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  Daemon() = default;
  // The event bus, reporting from the cache, and the ZeroMQ publisher if
  // configured (UNAVAILABLE if its endpoints cannot be bound).
  absl::Status StartEvents(const DaemonConfig& config);

  SystemClock clock_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<BlockCache> cache_;
  // The cache's residency events (after cache_, which reports into it
  // until ~Daemon unsets it) and their ZeroMQ publisher (null: off).
  std::unique_ptr<BlockEventBus> events_;
  std::unique_ptr<ZmqEventPublisher> zmq_events_;
  GpuInventory gpus_;
  std::unique_ptr<LookupPlanner> planner_;
  std::unique_ptr<CopyEngine> copy_engine_;
  std::unique_ptr<CopyWorkers> copy_workers_;  // second threads of Save and Load copies
  bool arena_pinned_ = false;                  // the host arena is registered with copy_engine_
  std::unique_ptr<GpuTier> gpu_tier_;          // may be null
  std::string gpu_tier_note_;                  // why it is null
  NamespaceTransforms transforms_;
  std::unique_ptr<RegionTable> regions_;
  // After cache_: destroyed first, so peers stop touching the arena first.
  std::unique_ptr<PeerTransfer> peer_transfer_;
  // Null when the daemon runs alone. Before the services, which read it,
  // and after cache_, which it reads.
  std::unique_ptr<Membership> membership_;
  // Null when the daemon runs alone or has no peer transport. Before the
  // services, which use it; after membership_, which it reads (it stops its
  // offer thread first).
  std::unique_ptr<ClusterTier> cluster_tier_;
  // Drops regions whose owner process exited, every second.
  Notification stop_reaper_;
  std::thread reaper_;
  std::string listen_address_;
  // Cancels streams that stop moving; outlives the services that use it.
  std::unique_ptr<StreamIdleReaper> idle_reaper_;
  // Run the services' calls (one each: a call of one never queues behind
  // another's). Declared before the services and the server: they outlive
  // both, and Shutdown stops them once the server has ended every call.
  std::unique_ptr<CallExecutor> kvcache_calls_;
  std::unique_ptr<CallExecutor> transfer_calls_;
  std::unique_ptr<CallExecutor> admin_calls_;
  std::unique_ptr<CallExecutor> peer_calls_;
  std::unique_ptr<KvCacheService> kvcache_service_;
  std::unique_ptr<AdminService> admin_service_;
  std::unique_ptr<PeerService> peer_service_;
  std::unique_ptr<grpc::Server> server_;
  // After server_: destroyed first (the server is shut down by then).
  std::unique_ptr<DaemonMetrics> metrics_;
  Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_DAEMON_H_
