// Shared by the gRPC benchmarks: an in-process kvtierd with benchmark
// settings, and a namespace whose blocks are a given number of bytes.
#ifndef KVTIER_BENCH_BENCH_DAEMON_H_
#define KVTIER_BENCH_BENCH_DAEMON_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"
#include "server/heap_tuning.h"

namespace kvtier::bench {

// A daemon on `listen` with a host tier of `host_bytes`, no tier probe and
// no NVMe tier; null (after printing why) if it cannot start. The process's
// heap is tuned and abseil's deadlock detector is off, as kvtierd's main()
// does (server/heap_tuning.h, server/main.cc); the benchmark's in-process
// clients share that. `prefault`: host_tier.prefault.
inline std::unique_ptr<Daemon> StartDaemon(const std::string& listen, uint64_t host_bytes,
                                           bool prefault = false) {
  TuneHeapForMessages().IgnoreError();
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  DaemonConfig c = DefaultConfig(8ull << 30);
  c.listen = listen;
  c.metrics_listen = "off";
  c.host_tier_bytes = host_bytes;
  c.host_prefault = prefault;
  c.costmodel_probe_tiers = false;
  absl::StatusOr<std::unique_ptr<Daemon>> d = Daemon::Start(c);
  if (!d.ok()) {
    std::fprintf(stderr, "kvtierd did not start: %s\n", d.status().ToString().c_str());
    return nullptr;
  }
  return *std::move(d);
}

// Opens `model` with a layout of `block_bytes`-byte blocks (1 layer, 1 KV
// head of 128 dims, bf16, block_bytes / 512 tokens, rounded up); returns the
// namespace id, or "" on failure.
inline std::string OpenBlockNamespace(v1::KvCache::Stub& kv, const std::string& model,
                                      uint64_t block_bytes) {
  v1::OpenNamespaceRequest open;
  open.set_model_id(model);
  v1::NamespaceLayout* l = open.mutable_layout();
  l->set_num_layers(1);
  l->set_num_kv_heads(1);
  l->set_head_dim(128);
  l->set_dtype(v1::DTYPE_BF16);
  l->set_tokens_per_block(static_cast<uint32_t>((block_bytes + 511) / 512));
  l->set_tp_size(1);
  grpc::ClientContext ctx;
  v1::OpenNamespaceResponse resp;
  if (!kv.OpenNamespace(&ctx, open, &resp).ok()) return "";
  return resp.namespace_id();
}

}  // namespace kvtier::bench

#endif  // KVTIER_BENCH_BENCH_DAEMON_H_
