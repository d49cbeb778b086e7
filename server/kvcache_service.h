// KvCacheService: the gRPC adapter for kvtier.v1.KvCache. It admits the
// caller (the role each RPC needs is in server/rpc_roles.h), converts
// messages to domain types, delegates (to BlockCache; a Put's chunks to
// PutAssembly; RegisterMemory's policy to RegionRegistration), and maps the
// result to a gRPC status; its only state is a mutex that keeps
// OpenNamespace and CloseNamespace out of one another's way.
//
// Thread-safety: thread-safe (BlockCache is).
#ifndef KVTIER_SERVER_KVCACHE_SERVICE_H_
#define KVTIER_SERVER_KVCACHE_SERVICE_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "base/mutex.h"
#include "datapath/copy_engine.h"
#include "datapath/gpu_tier.h"
#include "datapath/memory_region.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "server/auth.h"
#include "server/lookup_planner.h"
#include "server/region_registration.h"
#include "server/storage_encoding.h"
#include "server/stream_idle_reaper.h"
#include "storage/block_cache.h"
#include "transfer/peer_transfer.h"

namespace kvtier {

class KvCacheService final : public v1::KvCache::Service {
 public:
  // What the service delegates to. Pointers must outlive the service.
  struct Deps {
    // Admits callers (role tenant) and gives their tenant.
    const Authenticator* auth = nullptr;
    BlockCache* cache = nullptr;
    // Prices Lookups and owns NVMe admission by tier value.
    LookupPlanner* planner = nullptr;
    // The memory engines register for Save and Load.
    RegionTable* regions = nullptr;
    // Default Get chunk.
    uint64_t get_chunk_bytes = 0;
    // The cap for a client's max_chunk_bytes (keeps messages under the size
    // limit).
    uint64_t max_chunk_bytes = 0;
    // Moves bytes of GPU regions (nullptr: none).
    CopyEngine* copy_engine = nullptr;
    // Imports CUDA IPC memory for RegisterMemory (empty: not supported).
    CudaIpcOpener open_cuda_ipc;
    // The storage encodings of open namespaces.
    NamespaceTransforms* transforms = nullptr;
    // Serves Loads into GPU regions of its device (may be null).
    GpuTier* gpu_tier = nullptr;
    // Moves blocks to and from peer daemons (Transfer).
    PeerTransfer* peer_transfer = nullptr;
    // Cancels streams that stop moving (may be null: never).
    StreamIdleReaper* idle_reaper = nullptr;
  };

  explicit KvCacheService(Deps deps);

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
  grpc::Status RegionTransfer(const char* rpc, bool save, const Identity& who,
                              grpc::ServerContext* context, const std::string& namespace_id,
                              const std::string& region_id,
                              const google::protobuf::RepeatedPtrField<v1::BlockRef>& refs,
                              grpc::ServerWriter<v1::BlockCompletion>* writer,
                              std::optional<uint8_t> retention = std::nullopt);
  absl::Status DoPut(grpc::ServerContext* context, const Identity& who,
                     grpc::ServerReader<v1::PutChunk>* reader, v1::PutResponse* response);
  // Tracks a streaming call with the idle reaper (an inert watch without one).
  std::unique_ptr<StreamIdleReaper::Watch> WatchIdle(grpc::ServerContext* context);

  const Deps deps_;
  // RegisterMemory's policy: which memory a tenant may register.
  const RegionRegistration region_registration_;
  // Serializes the namespace-table steps of OpenNamespace and CloseNamespace
  // (transform, cache, planner), so one never sees the other half done.
  Mutex open_close_mu_;
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_KVCACHE_SERVICE_H_
