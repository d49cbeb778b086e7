// KvCacheService: the gRPC adapter for kvtier.v1.KvCache. It admits the
// caller (the role each RPC needs is in server/rpc_roles.h), converts
// messages to domain types, delegates (to BlockCache; a Put's chunks to
// PutAssembly; RegisterMemory's policy to RegionRegistration), and maps the
// result to a gRPC status; its only state is a mutex that keeps
// OpenNamespace and CloseNamespace out of one another's way.
//
// Asynchronous: every method is on gRPC's callback API. Domain work (all
// that takes the cache's lock, copies or may wait) runs on the service's
// CallExecutor (server/async/), never on gRPC's threads; each method has at
// most Deps::max_calls_per_method calls in flight. Put and Get stream chunk
// by chunk without holding a worker while the client sends or receives
// (server/kvcache_streams.cc).
//
// Thread-safety: thread-safe (BlockCache is).
#ifndef KVTIER_SERVER_KVCACHE_SERVICE_H_
#define KVTIER_SERVER_KVCACHE_SERVICE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/mutex.h"
#include "cluster/cluster_tier.h"
#include "datapath/copy_engine.h"
#include "datapath/copy_workers.h"
#include "datapath/gpu_tier.h"
#include "datapath/memory_region.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "server/async/arena_messages.h"
#include "server/async/call_executor.h"
#include "server/async/queued_writer.h"
#include "server/auth.h"
#include "server/lookup_planner.h"
#include "server/region_registration.h"
#include "server/storage_encoding.h"
#include "server/stream_idle_reaper.h"
#include "storage/block_cache.h"
#include "transfer/peer_transfer.h"

namespace kvtier {

// Put and Get are raw methods (grpc::ByteBuffer in and out; the wire
// format is their messages'), so that a block's bytes are copied once on
// their way in or out: a Put chunk's data goes from the slices gRPC
// received into the block's slot (server/put_chunk_frame.h), a Get chunk's
// from the pinned block into the slice gRPC sends
// (server/get_chunk_frame.h). Not once: blocks of a namespace with a
// storage encoding (encoded and decoded through a buffer), and Put messages
// not as protobuf's serializer writes them (protobuf parses those whole).
class KvCacheService final
    : public v1::KvCache::WithRawCallbackMethod_Put<
          v1::KvCache::WithRawCallbackMethod_Get<v1::KvCache::CallbackService>> {
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
    // Second threads for Save and Load of host regions (nullptr: a thread
    // started per copy group).
    CopyWorkers* copy_workers = nullptr;
    // Imports CUDA IPC memory for RegisterMemory (empty: not supported).
    CudaIpcOpener open_cuda_ipc;
    // The storage encodings of open namespaces.
    NamespaceTransforms* transforms = nullptr;
    // Serves Loads into GPU regions of its device (may be null).
    GpuTier* gpu_tier = nullptr;
    // Moves blocks to and from peer daemons (Transfer).
    PeerTransfer* peer_transfer = nullptr;
    // The other members' caches (null when the daemon runs alone): Lookup
    // and Get fill misses from it, Put and Save offer chains to it.
    ClusterTier* cluster_tier = nullptr;
    // Cancels streams that stop moving (may be null: never).
    StreamIdleReaper* idle_reaper = nullptr;
    // Runs the calls' work (required).
    CallExecutor* executor = nullptr;
    // Runs Transfer's, which waits on peers for up to its timeout (required;
    // a pool of its own, so Transfers to a slow peer never hold the threads
    // every other call needs).
    CallExecutor* transfer_executor = nullptr;
    // Calls of one method in flight; the next is RESOURCE_EXHAUSTED.
    uint32_t max_calls_per_method = 256;
  };

  explicit KvCacheService(Deps deps);

  using Ctx = grpc::CallbackServerContext;
  grpc::ServerUnaryReactor* OpenNamespace(Ctx* context, const v1::OpenNamespaceRequest* request,
                                          v1::OpenNamespaceResponse* response) override;
  grpc::ServerUnaryReactor* Lookup(Ctx* context, const v1::LookupRequest* request,
                                   v1::LookupResponse* response) override;
  grpc::ServerReadReactor<grpc::ByteBuffer>* Put(Ctx* context, grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Get(Ctx* context,
                                                  const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Release(Ctx* context, const v1::ReleaseRequest* request,
                                    v1::ReleaseResponse* response) override;
  grpc::ServerUnaryReactor* Delete(Ctx* context, const v1::DeleteRequest* request,
                                   v1::DeleteResponse* response) override;
  grpc::ServerUnaryReactor* CloseNamespace(Ctx* context, const v1::CloseNamespaceRequest* request,
                                           v1::CloseNamespaceResponse* response) override;
  grpc::ServerUnaryReactor* RegisterMemory(Ctx* context, const v1::RegisterMemoryRequest* request,
                                           v1::RegisterMemoryResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterMemory(Ctx* context,
                                             const v1::UnregisterMemoryRequest* request,
                                             v1::UnregisterMemoryResponse* response) override;
  grpc::ServerWriteReactor<v1::BlockCompletion>* Save(Ctx* context,
                                                      const v1::SaveRequest* request) override;
  grpc::ServerWriteReactor<v1::BlockCompletion>* Load(Ctx* context,
                                                      const v1::LoadRequest* request) override;
  grpc::ServerUnaryReactor* Transfer(Ctx* context, const v1::TransferRequest* request,
                                     v1::TransferResponse* response) override;

 private:
  class PutCall;
  class GetCall;
  // The synchronous bodies, run on the executor.
  grpc::Status DoOpenNamespace(Ctx* context, const v1::OpenNamespaceRequest* request,
                               v1::OpenNamespaceResponse* response);
  grpc::Status DoLookup(Ctx* context, const v1::LookupRequest* request,
                        v1::LookupResponse* response);
  // A Lookup on gRPC's thread (see Lookup): nullopt, nothing done, when the
  // cache's lock is busy.
  std::optional<grpc::Status> TryLookupInline(Ctx* context, const v1::LookupRequest* request,
                                              v1::LookupResponse* response);
  // A done Lookup's response: its blocks, groups, plan and lease
  // (`may_wait`: LookupPlanner::Plan's).
  grpc::Status AnswerLookup(const v1::LookupRequest& request, const NamespaceId& ns,
                            const LookupResult& r, HybridCutPlanner* hybrid_plan, bool may_wait,
                            v1::LookupResponse* response);
  grpc::Status DoRelease(Ctx* context, const v1::ReleaseRequest* request,
                         v1::ReleaseResponse* response);
  grpc::Status DoDelete(Ctx* context, const v1::DeleteRequest* request,
                        v1::DeleteResponse* response);
  grpc::Status DoCloseNamespace(Ctx* context, const v1::CloseNamespaceRequest* request,
                                v1::CloseNamespaceResponse* response);
  grpc::Status DoRegisterMemory(Ctx* context, const v1::RegisterMemoryRequest* request,
                                v1::RegisterMemoryResponse* response);
  grpc::Status DoUnregisterMemory(Ctx* context, const v1::UnregisterMemoryRequest* request,
                                  v1::UnregisterMemoryResponse* response);
  grpc::Status DoTransfer(Ctx* context, const v1::TransferRequest* request,
                          v1::TransferResponse* response);
  // Save and Load share everything but the copy direction; completions go
  // to `out` (as runs where the request asked: CompletionRuns), which the
  // caller closes with the returned status.
  grpc::Status RegionTransfer(const char* rpc, bool save, const Identity& who, Ctx* context,
                              const std::string& namespace_id, const std::string& region_id,
                              const google::protobuf::RepeatedPtrField<v1::BlockRef>& refs,
                              QueuedWriter<v1::BlockCompletion>* out,
                              std::optional<uint8_t> retention, bool completion_runs);
  // Starts a Save or Load: the work runs on the executor, its completions
  // stream as they come.
  grpc::ServerWriteReactor<v1::BlockCompletion>* StartRegionTransfer(
      const char* rpc, bool save, Ctx* context, const v1::SaveRequest* save_request,
      const v1::LoadRequest* load_request);
  // Tracks a streaming call with the idle reaper (an inert watch without one).
  std::unique_ptr<StreamIdleReaper::Watch> WatchIdle(grpc::ServerContextBase* context);

  const Deps deps_;
  // RegisterMemory's policy: which memory a tenant may register.
  const RegionRegistration region_registration_;
  // Serializes the namespace-table steps of OpenNamespace and CloseNamespace
  // (transform, cache, planner), so one never sees the other half done.
  Mutex open_close_mu_;
  const CallLimits limits_;
  // Lookup's request and response, on an arena per call (the hot unary
  // method: a string per key asked, a BlockInfo per key answered).
  ArenaMessages<v1::LookupRequest, v1::LookupResponse> lookup_messages_;
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_KVCACHE_SERVICE_H_
