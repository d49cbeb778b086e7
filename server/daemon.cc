#include "server/daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <cstdint>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/sigbus_guard.h"
#include "base/status_macros.h"
#include "gpu/copy_engine_factory.h"
#include "gpu/cuda_ipc_region.h"
#include "gpu/device_pool.h"
#include "server/cluster_setup.h"
#include "server/daemon_metrics.h"
#include "server/grpc_auth.h"
#include "server/grpc_peer_channel.h"
#include "server/peer_setup.h"
#include "spdlog/spdlog.h"

namespace kvtier {
namespace {

// "host:port" with the port replaced by the one actually bound.
std::string BoundAddress(const std::string& requested, int port) {
  if (absl::StartsWith(requested, "unix:") || absl::StartsWith(requested, "unix-abstract:")) {
    return requested;
  }
  const size_t colon = requested.rfind(':');
  return absl::StrCat(requested.substr(0, colon), ":", port);
}

}  // namespace

namespace {

// Each tenant's share of the daemon-wide limits (see Daemon::Start).
struct TenantShares {
  uint64_t namespaces;
  uint64_t leases;
  uint64_t regions;
  uint64_t region_bytes;
  uint64_t reserved_bytes;  // 0: the whole host tier
};

// The GPU tier gpu.tier asks for, on the copy engine's GPU; an error says
// why there is none (off, no GPU, too little memory).
absl::StatusOr<std::unique_ptr<GpuTier>> MakeGpuTier(const DaemonConfig& config,
                                                     const CopyEngine& engine,
                                                     const GpuInventory& gpus) {
  if (config.gpu_tier == "off") return absl::FailedPreconditionError("gpu.tier is off");
  const CopyEngineCapabilities caps = engine.Capabilities();
  if (!caps.device_memory) {
    return absl::FailedPreconditionError(
        absl::StrCat("the copy engine is ", caps.name, ": ", caps.detail));
  }
  const int device = static_cast<int>(config.gpu_device);
  uint64_t bytes = 0;
  if (config.gpu_tier == "auto") {
    uint64_t memory = 0;
    for (const GpuDevice& g : gpus.devices) {
      if (g.index == device) memory = g.memory_bytes;
    }
    bytes = std::min<uint64_t>(uint64_t{4} << 30, memory / 16);
  } else {
    bytes = *ParseBytes(config.gpu_tier);  // validated with the config
  }
  if (bytes < config.gpu_tier_slot_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPU ", device, " leaves less than one slot for the tier"));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<DevicePool> pool,
      DevicePool::Create(device, bytes, config.gpu_tier_slot_bytes, CudaDeviceAllocator()));
  return std::unique_ptr<GpuTier>(std::move(pool));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonConfig& config,
                                                      DaemonSeams seams) {
  RETURN_IF_ERROR(ValidateConfig(config));
  std::unique_ptr<Daemon> d(new Daemon());
  // Security first: a bad certificate or identities file fails the start
  // before anything is allocated.
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> server_credentials,
                   ServerCredentialsFor(config));
  ASSIGN_OR_RETURN(std::unique_ptr<Authenticator> auth, AuthenticatorFor(config));
  d->auth_ = std::move(auth);
  ASSIGN_OR_RETURN(Credentials peer_credentials, PeerCredentialsFor(config));
  spdlog::info("security: {}, {}",
               config.tls_cert.empty()        ? "plaintext gRPC"
               : config.tls_client_ca.empty() ? "TLS"
                                              : "mutual TLS",
               d->auth_->enabled()
                   ? absl::StrCat("authentication on (", d->auth_->size(), " identities)")
                   : std::string("authentication off (single tenant)"));

  BlockCacheOptions options;
  options.host_bytes = config.host_tier_bytes;
  options.slab_bytes = config.host_slab_bytes;
  options.huge_pages = config.host_huge_pages;
  options.prefault_host = config.host_prefault;
  options.eviction_policy = config.eviction_policy;
  options.max_block_bytes = config.max_block_bytes;
  options.max_namespaces = config.max_namespaces;
  options.max_keys_per_request = config.max_keys_per_request;
  options.max_leases = config.max_leases;
  // Each tenant's share. With authentication off there is one tenant, whose
  // share of namespaces and leases is the whole; lease blocks and reserved
  // bytes bound memory, so they apply to it too.
  // With N tenants named by the identities file, no share exceeds 1/N of
  // its daemon-wide limit, so all tenants together cannot deny any one.
  const bool tenants = d->auth_->enabled();
  const uint64_t n = std::max<uint64_t>(1, d->auth_->tenants());
  auto share = [&](uint64_t wanted, uint64_t whole) {
    return std::max<uint64_t>(1, std::min(wanted, whole / n));
  };
  TenantShares shares{config.max_namespaces, config.max_leases, config.max_regions, UINT64_MAX,
                      config.tenant_reserved_bytes};  // one tenant: the whole, tier included
  if (tenants) {
    shares.namespaces = share(config.tenant_max_namespaces, config.max_namespaces);
    shares.leases = share(config.tenant_max_leases, config.max_leases);
    shares.regions = share(config.tenant_max_regions, config.max_regions);
    shares.region_bytes = share(config.tenant_max_region_bytes, config.max_region_bytes);
    shares.reserved_bytes = share(config.tenant_reserved_bytes != 0 ? config.tenant_reserved_bytes
                                                                    : config.host_tier_bytes / 2,
                                  config.host_tier_bytes);
    spdlog::info(
        "per-tenant limits ({} tenants): {} namespaces, {} leases pinning {} blocks, {} regions "
        "of {} bytes, {} reserved host bytes",
        n, shares.namespaces, shares.leases, config.tenant_max_lease_blocks, shares.regions,
        shares.region_bytes, shares.reserved_bytes);
  }
  options.tenant.max_namespaces = static_cast<uint32_t>(shares.namespaces);
  options.tenant.max_leases = static_cast<uint32_t>(shares.leases);
  options.tenant.max_lease_blocks = config.tenant_max_lease_blocks;
  options.tenant.max_reserved_bytes = shares.reserved_bytes;  // 0: the whole tier
  options.default_lease_ttl = absl::Milliseconds(config.default_lease_ttl_ms);
  options.max_lease_ttl = absl::Milliseconds(config.max_lease_ttl_ms);
  if (!config.nvme_dirs.empty()) {
    NvmeTierOptions nvme;
    for (absl::string_view dir : absl::StrSplit(config.nvme_dirs, ',', absl::SkipWhitespace())) {
      nvme.store.dirs.emplace_back(absl::StripAsciiWhitespace(dir));
    }
    nvme.store.bytes_per_dir = config.nvme_bytes_per_dir;
    nvme.store.slab_bytes = config.nvme_slab_bytes;
    nvme.io.kind = config.nvme_io_engine;
    nvme.io.queue_depth = config.nvme_queue_depth;
    nvme.write_policy = config.nvme_write_policy;
    nvme.write_through_hits = config.nvme_write_through_hits;
    nvme.admit_min_uses = config.nvme_admit_min_uses;
    nvme.host_high_watermark = config.nvme_host_high_watermark;
    nvme.host_low_watermark = config.nvme_host_low_watermark;
    nvme.nvme_high_watermark = config.nvme_high_watermark;
    nvme.nvme_low_watermark = config.nvme_low_watermark;
    nvme.mover_interval = absl::Milliseconds(config.nvme_mover_interval_ms);
    nvme.register_arena = config.nvme_register_arena;
    nvme.wear =
        WearOptions{config.nvme_device_capacity_bytes, config.nvme_dwpd, config.nvme_warranty_years,
                    config.nvme_wear_safety, static_cast<double>(config.nvme_wear_burst_seconds)};
    options.nvme = nvme;
  }
  options.probe_tiers = config.costmodel_probe_tiers;
  ASSIGN_OR_RETURN(std::unique_ptr<BlockCache> cache, BlockCache::Create(options, &d->clock_));
  d->cache_ = std::move(cache);
  RETURN_IF_ERROR(d->StartEvents(config));
  d->gpus_ = ProbeGpus();
  PlannerOptions planner_options;
  planner_options.gpu = config.costmodel_gpu;
  planner_options.mfu = config.costmodel_mfu;
  planner_options.fp8_compute = config.costmodel_compute_dtype == "fp8";
  planner_options.admission_tokens = config.costmodel_admission_tokens;
  ASSIGN_OR_RETURN(std::unique_ptr<LookupPlanner> planner,
                   LookupPlanner::Create(planner_options, d->gpus_, d->cache_.get()));
  d->planner_ = std::move(planner);
  spdlog::info("planner: {}", d->planner_->Snapshot().note);

  const int max_message = static_cast<int>(config.max_message_bytes);
  if (seams.copy_engine != nullptr) {
    d->copy_engine_ = std::move(seams.copy_engine);
  } else {
    CopyEngineOptions copy_options;
    copy_options.device = static_cast<int>(config.gpu_device);
    ASSIGN_OR_RETURN(std::unique_ptr<CopyEngine> engine, CreateCopyEngine(copy_options));
    d->copy_engine_ = std::move(engine);
  }
  ASSIGN_OR_RETURN(d->copy_workers_, CopyWorkers::Create(CopyWorkers::DefaultThreads()));
  const CopyEngineCapabilities copy = d->copy_engine_->Capabilities();
  spdlog::info("copy engine: {} ({})", copy.name, copy.detail);
  if (copy.device_memory) {
    // Pin the host tier once, so copies to and from GPUs run at link speed.
    const absl::Span<uint8_t> arena = d->cache_->host_arena();
    if (absl::Status s = d->copy_engine_->RegisterHost(arena.data(), arena.size()); s.ok()) {
      d->arena_pinned_ = true;
    } else {
      spdlog::warn("host tier not pinned for GPU copies (they will be slower): {}", s.ToString());
    }
  }
  if (!seams.open_cuda_ipc) seams.open_cuda_ipc = OpenCudaIpcRegion;
  if (seams.gpu_tier != nullptr) {
    d->gpu_tier_ = std::move(seams.gpu_tier);
  } else {
    absl::StatusOr<std::unique_ptr<GpuTier>> tier = MakeGpuTier(config, *d->copy_engine_, d->gpus_);
    if (tier.ok()) {
      d->gpu_tier_ = *std::move(tier);
    } else {
      d->gpu_tier_note_ = std::string(tier.status().message());
    }
  }
  if (d->gpu_tier_ != nullptr) {
    const GpuTier::Stats t = d->gpu_tier_->stats();
    spdlog::info("gpu tier: {} bytes on GPU {} in slots of {}", t.capacity_bytes, t.device,
                 t.slot_bytes);
  } else {
    spdlog::info("gpu tier: off ({})", d->gpu_tier_note_);
  }
  d->regions_ = std::make_unique<RegionTable>(config.max_regions, config.max_region_bytes,
                                              config.shm_dir, shares.regions, shares.region_bytes);
  {
    std::string why;
    ASSIGN_OR_RETURN(std::unique_ptr<Transport> chosen,
                     ChoosePeerTransport(config, std::move(seams.transport), &why));
    std::unique_ptr<Transport> transport = std::move(chosen);
    PeerTransferOptions options;
    options.role = *ParsePeerRole(config.peer_role);  // validated with the config
    options.timeout = absl::Milliseconds(config.peer_timeout_ms);
    options.max_pending = config.peer_max_pending;
    options.max_keys = config.max_keys_per_request;
    for (absl::string_view p : absl::StrSplit(config.peer_allowed, ',', absl::SkipWhitespace())) {
      options.allowed_peers.emplace_back(absl::StripAsciiWhitespace(p));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<PeerTransfer> peer,
                     PeerTransfer::Create(d->cache_.get(), std::move(transport), why,
                                          GrpcPeerChannels(std::move(peer_credentials)), options));
    d->peer_transfer_ = std::move(peer);
    const PeerTransferInfo info = d->peer_transfer_->Info();
    if (info.available) {
      spdlog::info("peer transfer: {} (transports {}, net devices {}{}), role {}",
                   info.transport.name, info.transport.transports, info.transport.net_devices,
                   info.transport.detects_peer_failure ? ", peer failure detection" : "",
                   PeerRoleName(info.role));
    } else {
      spdlog::info("peer transfer: unavailable ({})", info.detail);
    }
  }
  d->reaper_ = std::thread(
      [regions = d->regions_.get(), peer = d->peer_transfer_.get(), stop = &d->stop_reaper_] {
        while (!stop->WaitForNotificationWithTimeout(absl::Seconds(1))) {
          regions->RemoveExitedOwners();
          peer->ExpireStale();
        }
      });
  // Client memory may vanish under a copy (a truncated shared-memory file):
  // turn that SIGBUS into an error of the call. After the transport, whose
  // library installs a handler of its own, to chain to it.
  InstallSigbusGuard();
  d->idle_reaper_ = std::make_unique<StreamIdleReaper>(
      absl::Milliseconds(config.stream_idle_timeout_ms), &d->clock_);
  ASSIGN_OR_RETURN(d->kvcache_calls_,
                   CallExecutor::Create({.name = "kvcache", .threads = config.call_threads}));
  const uint32_t side_threads = std::max<uint32_t>(2, config.call_threads / 4);
  ASSIGN_OR_RETURN(d->admin_calls_,
                   CallExecutor::Create({.name = "admin", .threads = side_threads}));
  ASSIGN_OR_RETURN(d->peer_calls_, CallExecutor::Create({.name = "peer", .threads = side_threads}));
  ASSIGN_OR_RETURN(d->transfer_calls_,
                   CallExecutor::Create({.name = "transfer", .threads = side_threads}));
  if (!config.cluster_etcd.empty()) {
    if (d->peer_transfer_->Info().available) {
      ClusterTierOptions tier;
      tier.pull_timeout = absl::Milliseconds(config.cluster_pull_timeout_ms);
      // Offers are best effort: a slow owner does not hold a shutdown long.
      tier.push_timeout = std::min(absl::Milliseconds(config.peer_timeout_ms), absl::Seconds(5));
      tier.judge = [planner = d->planner_.get()](const NamespaceId& ns, uint32_t first,
                                                 uint32_t blocks, uint64_t bytes, double link) {
        return planner->PeerFetchBeatsRecompute(ns, first, blocks, bytes, link);
      };
      d->cluster_tier_ = std::make_unique<ClusterTier>(std::move(tier), d->cache_.get(),
                                                       d->peer_transfer_.get(), &d->clock_);
    } else {
      spdlog::warn("cluster: no shared tier, membership only: peer transfer is unavailable ({})",
                   d->peer_transfer_->Info().detail);
    }
  }
  d->kvcache_service_ = std::make_unique<KvCacheService>(KvCacheService::Deps{
      .auth = d->auth_.get(),
      .cache = d->cache_.get(),
      .planner = d->planner_.get(),
      .regions = d->regions_.get(),
      .get_chunk_bytes = config.get_chunk_bytes,
      .max_chunk_bytes = config.max_message_bytes - 65536,
      .copy_engine = d->copy_engine_.get(),
      .copy_workers = d->copy_workers_.get(),
      .open_cuda_ipc = std::move(seams.open_cuda_ipc),
      .transforms = &d->transforms_,
      .gpu_tier = d->gpu_tier_.get(),
      .peer_transfer = d->peer_transfer_.get(),
      .cluster_tier = d->cluster_tier_.get(),
      .idle_reaper = d->idle_reaper_.get(),
      .executor = d->kvcache_calls_.get(),
      .transfer_executor = d->transfer_calls_.get(),
      .max_calls_per_method = config.max_calls_per_method,
  });

  // Both are process-wide switches of gRPC's; they only affect servers built
  // after them, and every kvtierd server wants them.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen, server_credentials, &port);
  // A second daemon on the same port must fail, not share it silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Idle connections hold descriptors: one that has not finished its
  // handshake (TLS and the HTTP/2 preface) in 10 s is closed, and so is one
  // with no call for server.max_connection_idle_ms.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 10'000);
  if (config.max_connection_idle_ms > 0) {
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_IDLE_MS,
        static_cast<int>(std::min<uint32_t>(config.max_connection_idle_ms, INT32_MAX)));
  }
  builder.SetMaxReceiveMessageSize(max_message);
  builder.SetMaxSendMessageSize(max_message);
  builder.RegisterService(d->kvcache_service_.get());
  d->admin_service_ = std::make_unique<AdminService>(AdminService::Deps{
      .auth = d->auth_.get(),
      .cache = d->cache_.get(),
      .planner = d->planner_.get(),
      .gpus = d->gpus_,
      .started = absl::Now(),
      .transforms = &d->transforms_,
      .copy_engine = copy,
      .gpu_tier = d->gpu_tier_.get(),
      .gpu_tier_note = d->gpu_tier_note_,
      .regions = d->regions_.get(),
      .peer_transfer = d->peer_transfer_.get(),
      .cluster_etcd = config.cluster_etcd,
      .events = d->events_.get(),
      .zmq_events = d->zmq_events_.get(),
      .zmq_endpoint = config.events_zmq_endpoint,
      .zmq_replay_endpoint = config.events_zmq_replay_endpoint,
      .max_keys_per_request = config.max_keys_per_request,
      .executor = d->admin_calls_.get(),
      .max_calls_per_method = config.max_calls_per_method,
  });
  builder.RegisterService(d->admin_service_.get());
  d->metrics_ = std::make_unique<DaemonMetrics>(d->admin_service_.get(), d->auth_.get(),
                                                config.metrics_max_namespaces);
  if (config.metrics_listen != "off") {  // nobody would read the RPC metrics otherwise
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> rpc;
    rpc.push_back(d->metrics_->InterceptorFactory());
    builder.experimental().SetInterceptorCreators(std::move(rpc));
  }
  d->peer_service_ = std::make_unique<PeerService>(
      PeerService::Deps{.auth = d->auth_.get(),
                        .transfer = d->peer_transfer_.get(),
                        .executor = d->peer_calls_.get(),
                        .max_calls_per_method = config.max_calls_per_method});
  builder.RegisterService(d->peer_service_.get());
  // After every service is built: their construction happens-before all
  // the work the executors run.
  for (CallExecutor* e : {d->kvcache_calls_.get(), d->transfer_calls_.get(), d->admin_calls_.get(),
                          d->peer_calls_.get()}) {
    e->Start();
  }
  d->server_ = builder.BuildAndStart();
  if (d->server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on '", config.listen, "' (address in use or invalid?)"));
  }
  d->listen_address_ = BoundAddress(config.listen, port);
  d->admin_service_->set_listen_address(d->listen_address_);
  // After the gRPC port: a daemon whose address is taken says so first.
  RETURN_IF_ERROR(d->metrics_->Listen(config.metrics_listen));
  if (!d->metrics_->address().empty()) {
    spdlog::info("metrics on http://{}/metrics", d->metrics_->address());
  }
  ASSIGN_OR_RETURN(d->membership_, JoinCluster(config,
                                               {.bound_address = d->listen_address_,
                                                .daemon_id = d->peer_transfer_->daemon_id(),
                                                .transport = d->peer_transfer_->Info().available},
                                               d->cache_.get(), &d->clock_));
  d->admin_service_->set_membership(
      d->membership_.get(), d->cluster_tier_.get(),
      d->cluster_tier_ != nullptr
          ? ""
          : absl::StrCat("peer transfer unavailable: ", d->peer_transfer_->Info().detail));
  if (d->cluster_tier_ != nullptr) d->cluster_tier_->Attach(d->membership_.get());
  d->server_->GetHealthCheckService()->SetServingStatus(true);
  return d;
}

absl::Status Daemon::StartEvents(const DaemonConfig& config) {
  BlockCache* cache = cache_.get();
  events_ = AttachEventBus(cache);
  if (config.events_zmq_endpoint.empty()) return absl::OkStatus();
  ZmqEventPublisherOptions zmq;
  zmq.endpoint = config.events_zmq_endpoint;
  zmq.replay_endpoint = config.events_zmq_replay_endpoint;
  zmq.topic = config.events_zmq_topic;
  zmq.model = config.events_zmq_model;
  zmq.int_hashes = config.events_zmq_hashes == "int";
  zmq.buffer_steps = config.events_zmq_buffer_steps;
  ASSIGN_OR_RETURN(
      zmq_events_,
      ZmqEventPublisher::Create(
          zmq, events_.get(),
          [cache](const NamespaceId& ns) -> std::optional<ZmqEventPublisher::NamespaceInfo> {
            for (const NamespaceSnapshot& n : cache->Namespaces()) {
              if (n.id == ns) {
                return ZmqEventPublisher::NamespaceInfo{n.spec.model_id,
                                                        n.spec.layout.tokens_per_block};
              }
            }
            return std::nullopt;  // closed meanwhile, or a hybrid's group
          }));
  spdlog::info("KV events: publishing on {} (replay: {})", zmq.endpoint,
               zmq.replay_endpoint.empty() ? "off" : zmq.replay_endpoint);
  return absl::OkStatus();
}

Daemon::~Daemon() {
  Shutdown(absl::ZeroDuration());
  // The event publisher and bus go before the cache: it stops reporting.
  zmq_events_.reset();
  if (cache_ != nullptr) cache_->SetEventSink(nullptr);
  stop_reaper_.Notify();
  if (reaper_.joinable()) reaper_.join();
  if (arena_pinned_) {
    copy_engine_->UnregisterHost(cache_->host_arena().data()).IgnoreError();
  }
}

void Daemon::Shutdown(absl::Duration grace) {
  MutexLock lock(&shutdown_mu_);
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  const absl::Time deadline = absl::Now() + grace;
  // Bounded: the round in flight (etcd calls of cluster.etcd_timeout_ms)
  // and a revoke, skipped when etcd was away.
  if (membership_ != nullptr) membership_->Leave();
  server_->GetHealthCheckService()->SetServingStatus(false);
  // With an NVMe tier, in-flight calls get half the grace and the drain
  // below at least the other half.
  const absl::Duration calls = cache_->nvme_enabled() ? grace / 2 : grace;
  server_->Shutdown(absl::ToChronoTime(absl::Now() + calls));
  server_->Wait();
  // Every call has finished, so nothing submits any more.
  kvcache_calls_->Stop();
  transfer_calls_->Stop();
  admin_calls_->Stop();
  peer_calls_->Stop();
  // No call runs any more: persist what the write policy still owes NVMe
  // (write-through blocks acknowledged but not yet written) in what is left
  // of the grace period.
  if (cache_->nvme_enabled() && grace > absl::ZeroDuration()) {
    bool cut = false;
    const absl::Time start = absl::Now();
    const size_t n = cache_->DrainWrites(deadline, &cut);
    if (cut) {
      spdlog::warn(
          "shutdown: wrote {} blocks to NVMe in {}; the grace period ended with blocks still "
          "unwritten (raise server.shutdown_grace_ms)",
          n, absl::FormatDuration(absl::Now() - start));
    } else if (n > 0) {
      spdlog::info("shutdown: wrote {} blocks to NVMe in {}", n,
                   absl::FormatDuration(absl::Now() - start));
    }
  }
}

}  // namespace kvtier
