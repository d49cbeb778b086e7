// AdminService: the gRPC adapter for kvtier.v1.Admin (operator views of the
// daemon: status, tiers, namespaces).
//
// Thread-safety: thread-safe.
#ifndef KVTIER_SERVER_ADMIN_SERVICE_H_
#define KVTIER_SERVER_ADMIN_SERVICE_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "datapath/copy_engine.h"
#include "datapath/gpu_tier.h"
#include "datapath/memory_region.h"
#include "gpu/gpu_probe.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "server/auth.h"
#include "server/lookup_planner.h"
#include "server/storage_encoding.h"
#include "storage/block_cache.h"
#include "transfer/peer_transfer.h"

namespace kvtier {

class AdminService final : public v1::Admin::Service {
 public:
  AdminService(const Authenticator* auth, BlockCache* cache, const LookupPlanner* planner,
               GpuInventory gpus, absl::Time started, const NamespaceTransforms* transforms,
               CopyEngineCapabilities copy_engine, const GpuTier* gpu_tier,
               std::string gpu_tier_note, const RegionTable* regions, PeerTransfer* peer_transfer)
      : auth_(auth),
        cache_(cache),
        planner_(planner),
        gpus_(std::move(gpus)),
        started_(started),
        transforms_(transforms),
        copy_engine_(std::move(copy_engine)),
        gpu_tier_(gpu_tier),
        gpu_tier_note_(std::move(gpu_tier_note)),
        regions_(regions),
        peer_transfer_(peer_transfer) {}

  // The address is known only once the server has bound it.
  void set_listen_address(std::string address) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    listen_address_ = std::move(address);
  }

  // The views the RPCs answer with, for other readers in the daemon (the
  // metrics exporter); no access check.
  // `scan_for_stranded`: count stranded blocks, an O(blocks) scan under the
  // cache's lock (else they read 0).
  void StatusView(v1::GetStatusResponse* response, bool scan_for_stranded = true)
      ABSL_LOCKS_EXCLUDED(mu_);
  void TiersView(v1::ListTiersResponse* response);
  void NamespacesView(v1::ListNamespacesResponse* response);
  void WearView(v1::GetWearResponse* response);  // reads SMART logs (I/O)
  void PeersView(v1::ListPeersResponse* response);

  grpc::Status GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest* request,
                         v1::GetStatusResponse* response) override;
  grpc::Status ListTiers(grpc::ServerContext* context, const v1::ListTiersRequest* request,
                         v1::ListTiersResponse* response) override;
  grpc::Status ListNamespaces(grpc::ServerContext* context,
                              const v1::ListNamespacesRequest* request,
                              v1::ListNamespacesResponse* response) override;
  grpc::Status GetWear(grpc::ServerContext* context, const v1::GetWearRequest* request,
                       v1::GetWearResponse* response) override;
  grpc::Status ListPeers(grpc::ServerContext* context, const v1::ListPeersRequest* request,
                         v1::ListPeersResponse* response) override;
  grpc::Status ListBlocks(grpc::ServerContext* context, const v1::ListBlocksRequest* request,
                          v1::ListBlocksResponse* response) override;
  grpc::Status Evict(grpc::ServerContext* context, const v1::EvictRequest* request,
                     grpc::ServerWriter<v1::EvictProgress>* writer) override;

 private:
  const Authenticator* const auth_;
  BlockCache* const cache_;
  const LookupPlanner* const planner_;
  const GpuInventory gpus_;
  const absl::Time started_;
  const NamespaceTransforms* const transforms_;
  const CopyEngineCapabilities copy_engine_;
  const GpuTier* const gpu_tier_;
  const std::string gpu_tier_note_;
  const RegionTable* const regions_;
  PeerTransfer* const peer_transfer_;
  Mutex mu_;
  std::string listen_address_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_ADMIN_SERVICE_H_
