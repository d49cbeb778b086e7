// AdminService: the gRPC adapter for kvtier.v1.Admin (operator views of the
// daemon: status, tiers, namespaces).
//
// Asynchronous like KvCacheService: gRPC's callback API, the work on the
// service's own CallExecutor (an Evict or a scan never delays engines'
// calls beyond the cache lock they share), at most
// Deps::max_calls_per_method calls per method.
//
// Thread-safety: thread-safe.
#ifndef KVTIER_SERVER_ADMIN_SERVICE_H_
#define KVTIER_SERVER_ADMIN_SERVICE_H_

#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "cluster/cluster_tier.h"
#include "cluster/membership.h"
#include "datapath/copy_engine.h"
#include "datapath/gpu_tier.h"
#include "datapath/memory_region.h"
#include "events/block_event_bus.h"
#include "events/zmq_event_publisher.h"
#include "gpu/gpu_probe.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "server/async/call_executor.h"
#include "server/async/queued_writer.h"
#include "server/auth.h"
#include "server/lookup_planner.h"
#include "server/storage_encoding.h"
#include "storage/block_cache.h"
#include "transfer/peer_transfer.h"

namespace kvtier {

class AdminService final : public v1::Admin::CallbackService {
 public:
  // What the service reads. Pointers must outlive the service.
  struct Deps {
    // Admits callers (role admin).
    const Authenticator* auth = nullptr;
    BlockCache* cache = nullptr;
    const LookupPlanner* planner = nullptr;
    GpuInventory gpus;
    // When the daemon started (for uptime).
    absl::Time started;
    const NamespaceTransforms* transforms = nullptr;
    CopyEngineCapabilities copy_engine;
    // May be null: then gpu_tier_note says why there is none.
    const GpuTier* gpu_tier = nullptr;
    std::string gpu_tier_note;
    const RegionTable* regions = nullptr;
    PeerTransfer* peer_transfer = nullptr;
    std::string cluster_etcd;  // as configured; membership set below
    // The cache's residency events (required for WatchBlocks), and their
    // ZeroMQ publisher (null when events.zmq_endpoint is unset).
    BlockEventBus* events = nullptr;
    const ZmqEventPublisher* zmq_events = nullptr;
    std::string zmq_endpoint;
    std::string zmq_replay_endpoint;
    uint32_t max_keys_per_request = 1024;
    // Runs the calls' work (required).
    CallExecutor* executor = nullptr;
    uint32_t max_calls_per_method = 256;
  };

  explicit AdminService(Deps deps);

  // The address is known only once the server has bound it.
  void set_listen_address(std::string address) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    listen_address_ = std::move(address);
  }

  // Once the daemon has joined its cluster (it needs the bound address
  // first); null, the default, while it runs alone. Must outlive the
  // service.
  // `tier` null: no shared tier, `tier_note` says why.
  void set_membership(const Membership* membership, const ClusterTier* tier, std::string tier_note)
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    membership_ = membership;
    cluster_tier_ = tier;
    cluster_tier_note_ = std::move(tier_note);
  }

  // The views the RPCs answer with, for other readers in the daemon (the
  // metrics exporter); no access check.
  // `scan_for_stranded`: count stranded blocks, an O(blocks) scan under the
  // cache's lock (else they read 0).
  void StatusView(v1::GetStatusResponse* response, bool scan_for_stranded = true)
      ABSL_LOCKS_EXCLUDED(mu_);
  void TiersView(v1::ListTiersResponse* response);
  // `scan_groups`: also each hybrid group's NVMe and stranded counts, an
  // O(its blocks) scan under the cache lock (ListNamespaces asks for it, a
  // metrics scrape does not).
  void NamespacesView(v1::ListNamespacesResponse* response, bool scan_groups = false);
  void WearView(v1::GetWearResponse* response);  // reads SMART logs (I/O)
  void PeersView(v1::ListPeersResponse* response);
  void ClusterView(v1::GetClusterResponse* response) ABSL_LOCKS_EXCLUDED(mu_);

  using Ctx = grpc::CallbackServerContext;
  grpc::ServerUnaryReactor* GetStatus(Ctx* context, const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;
  grpc::ServerUnaryReactor* ListTiers(Ctx* context, const v1::ListTiersRequest* request,
                                      v1::ListTiersResponse* response) override;
  grpc::ServerUnaryReactor* ListNamespaces(Ctx* context, const v1::ListNamespacesRequest* request,
                                           v1::ListNamespacesResponse* response) override;
  grpc::ServerUnaryReactor* GetWear(Ctx* context, const v1::GetWearRequest* request,
                                    v1::GetWearResponse* response) override;
  grpc::ServerUnaryReactor* ListPeers(Ctx* context, const v1::ListPeersRequest* request,
                                      v1::ListPeersResponse* response) override;
  grpc::ServerUnaryReactor* ListBlocks(Ctx* context, const v1::ListBlocksRequest* request,
                                       v1::ListBlocksResponse* response) override;
  grpc::ServerWriteReactor<v1::EvictProgress>* Evict(Ctx* context,
                                                     const v1::EvictRequest* request) override;
  grpc::ServerUnaryReactor* GetCluster(Ctx* context, const v1::GetClusterRequest* request,
                                       v1::GetClusterResponse* response) override;
  grpc::ServerWriteReactor<v1::BlockEvents>* WatchBlocks(
      Ctx* context, const v1::WatchBlocksRequest* request) override;

 private:
  // The synchronous bodies, run on the executor.
  grpc::Status DoGetStatus(Ctx* context, const v1::GetStatusRequest* request,
                           v1::GetStatusResponse* response);
  grpc::Status DoListTiers(Ctx* context, const v1::ListTiersRequest* request,
                           v1::ListTiersResponse* response);
  grpc::Status DoListNamespaces(Ctx* context, const v1::ListNamespacesRequest* request,
                                v1::ListNamespacesResponse* response);
  grpc::Status DoGetWear(Ctx* context, const v1::GetWearRequest* request,
                         v1::GetWearResponse* response);
  grpc::Status DoListPeers(Ctx* context, const v1::ListPeersRequest* request,
                           v1::ListPeersResponse* response);
  grpc::Status DoListBlocks(Ctx* context, const v1::ListBlocksRequest* request,
                            v1::ListBlocksResponse* response);
  absl::Status ClusterAnswer(const v1::GetClusterRequest& request, v1::GetClusterResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status DoGetCluster(Ctx* context, const v1::GetClusterRequest* request,
                            v1::GetClusterResponse* response);
  grpc::Status DoEvict(Ctx* context, const v1::EvictRequest* request,
                       QueuedWriter<v1::EvictProgress>* out);
  void EventsView(v1::EventsStatus* out) const;

  const Deps deps_;
  const CallLimits limits_;
  Mutex mu_;
  std::string listen_address_ ABSL_GUARDED_BY(mu_);
  const Membership* membership_ ABSL_GUARDED_BY(mu_) = nullptr;
  const ClusterTier* cluster_tier_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string cluster_tier_note_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_ADMIN_SERVICE_H_
