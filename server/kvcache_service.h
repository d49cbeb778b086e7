// KvCacheService: the gRPC adapter for kvtier.v1.KvCache. It converts
// messages to domain types, calls BlockCache, and maps the result to a gRPC
// status; its only state is a mutex that keeps OpenNamespace and
// CloseNamespace out of one another's way.
//
// Thread-safety: thread-safe (BlockCache is).
#ifndef KVTIER_SERVER_KVCACHE_SERVICE_H_
#define KVTIER_SERVER_KVCACHE_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "base/mutex.h"
#include "datapath/copy_engine.h"
#include "datapath/gpu_tier.h"
#include "datapath/memory_region.h"
#include "gpu/cuda_ipc_region.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "server/auth.h"
#include "server/lookup_planner.h"
#include "server/storage_encoding.h"
#include "server/stream_idle_reaper.h"
#include "storage/block_cache.h"
#include "transfer/peer_transfer.h"

namespace kvtier {

using CudaIpcOpener =
    std::function<absl::StatusOr<std::unique_ptr<MemoryRegion>>(const CudaIpcSpec& spec)>;

class KvCacheService final : public v1::KvCache::Service {
 public:
  // `get_chunk_bytes`: default Get chunk; `max_chunk_bytes`: the cap for a
  // client's max_chunk_bytes (keeps messages under the size limit).
  // `planner` prices Lookups and owns NVMe admission by tier value.
  // `regions` holds the memory engines register for Save and Load.
  // `copy_engine` moves bytes of GPU regions (nullptr: none);
  // `open_cuda_ipc` imports CUDA IPC memory for RegisterMemory;
  // `transforms` holds the storage encodings of open namespaces;
  // `gpu_tier` (may be null) serves Loads into GPU regions of its device;
  // `peer_transfer` moves blocks to and from peer daemons (Transfer);
  // `auth` admits callers (role tenant) and gives their tenant;
  // `idle_reaper` (may be null: never) cancels streams that stop moving.
  KvCacheService(const Authenticator* auth, BlockCache* cache, LookupPlanner* planner,
                 RegionTable* regions, uint64_t get_chunk_bytes, uint64_t max_chunk_bytes,
                 CopyEngine* copy_engine, CudaIpcOpener open_cuda_ipc,
                 NamespaceTransforms* transforms, GpuTier* gpu_tier, PeerTransfer* peer_transfer,
                 StreamIdleReaper* idle_reaper = nullptr)
      : auth_(auth),
        cache_(cache),
        planner_(planner),
        regions_(regions),
        transforms_(transforms),
        get_chunk_bytes_(get_chunk_bytes),
        max_chunk_bytes_(max_chunk_bytes),
        copy_engine_(copy_engine),
        open_cuda_ipc_(std::move(open_cuda_ipc)),
        gpu_tier_(gpu_tier),
        peer_transfer_(peer_transfer),
        idle_reaper_(idle_reaper) {}

  grpc::Status OpenNamespace(grpc::ServerContext* context, const v1::OpenNamespaceRequest* request,
                             v1::OpenNamespaceResponse* response) override;
  grpc::Status Lookup(grpc::ServerContext* context, const v1::LookupRequest* request,
                      v1::LookupResponse* response) override;
  grpc::Status Put(grpc::ServerContext* context, grpc::ServerReader<v1::PutChunk>* reader,
                   v1::PutResponse* response) override;
  grpc::Status Get(grpc::ServerContext* context, const v1::GetRequest* request,
                   grpc::ServerWriter<v1::GetChunk>* writer) override;
  grpc::Status Release(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                       v1::ReleaseResponse* response) override;
  grpc::Status Delete(grpc::ServerContext* context, const v1::DeleteRequest* request,
                      v1::DeleteResponse* response) override;
  grpc::Status CloseNamespace(grpc::ServerContext* context,
                              const v1::CloseNamespaceRequest* request,
                              v1::CloseNamespaceResponse* response) override;
  grpc::Status RegisterMemory(grpc::ServerContext* context,
                              const v1::RegisterMemoryRequest* request,
                              v1::RegisterMemoryResponse* response) override;
  grpc::Status UnregisterMemory(grpc::ServerContext* context,
                                const v1::UnregisterMemoryRequest* request,
                                v1::UnregisterMemoryResponse* response) override;
  grpc::Status Save(grpc::ServerContext* context, const v1::SaveRequest* request,
                    grpc::ServerWriter<v1::BlockCompletion>* writer) override;
  grpc::Status Load(grpc::ServerContext* context, const v1::LoadRequest* request,
                    grpc::ServerWriter<v1::BlockCompletion>* writer) override;
  grpc::Status Transfer(grpc::ServerContext* context, const v1::TransferRequest* request,
                        v1::TransferResponse* response) override;

 private:
  // Save and Load share everything but the copy direction.
  grpc::Status RegionTransfer(const char* rpc, bool save, grpc::ServerContext* context,
                              const std::string& namespace_id, const std::string& region_id,
                              const google::protobuf::RepeatedPtrField<v1::BlockRef>& refs,
                              grpc::ServerWriter<v1::BlockCompletion>* writer);
  absl::Status DoPut(grpc::ServerContext* context, const Identity& who,
                     grpc::ServerReader<v1::PutChunk>* reader, v1::PutResponse* response);

  const Authenticator* const auth_;
  BlockCache* const cache_;
  LookupPlanner* const planner_;
  RegionTable* const regions_;
  NamespaceTransforms* const transforms_;
  const uint64_t get_chunk_bytes_;
  const uint64_t max_chunk_bytes_;
  CopyEngine* const copy_engine_;
  const CudaIpcOpener open_cuda_ipc_;
  GpuTier* const gpu_tier_;  // may be null
  PeerTransfer* const peer_transfer_;
  StreamIdleReaper* const idle_reaper_;  // may be null
  // Serializes the namespace-table steps of OpenNamespace and CloseNamespace
  // (transform, cache, planner), so one never sees the other half done.
  Mutex open_close_mu_;

  // Tracks a streaming call with idle_reaper_ (an inert watch without one).
  std::unique_ptr<StreamIdleReaper::Watch> WatchIdle(grpc::ServerContext* context);
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_KVCACHE_SERVICE_H_
