// bench/gpu_copy: the CUDA copy engine and fp8 kernels on a real GPU, each
// against its baseline in the same run:
//  - block copies host<->device (64 blocks of 2 MiB, scattered in both
//    memories) vs one cudaMemcpyAsync of a contiguous pinned buffer of the
//    same bytes (target >= 0.9x);
//  - gather/scatter of vLLM per-layer blocks (2 x 32 chunks of 32 KiB per
//    block) between device tensors and pinned host, and device to device
//    through the copy kernel, vs the contiguous copy (target >= 0.8x);
//  - fp8 encode/decode, bytes read + written per second, vs the HBM
//    bandwidth a device-to-device cudaMemcpy reaches (read + write).
// Without a GPU it prints "SKIP: ..." and exits 0. Prints a JSON summary
// last.
//
//   build/bench/gpu_copy [--blocks 64] [--rounds 10]
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/best_seconds.h"
#include "datapath/engine_layout.h"
#include "encoding/fp8_codec.h"
#include "gpu/cuda/copy_kernel.h"
#include "gpu/cuda/cuda_copy_engine.h"
#include "gpu/fp8_device.h"
#include "gpu/gpu_probe.h"

namespace {

using kvtier::bench::BestSeconds;

using Clock = std::chrono::steady_clock;

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Row {
  std::string name;
  double gbps, baseline_gbps;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace kvtier;
  int blocks = 64, rounds = 10;
  CLI::App app{"CUDA copy engine and fp8 kernels against cudaMemcpy"};
  app.add_option("--blocks", blocks, "blocks per round")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "rounds (the best is reported)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const GpuInventory inv = ProbeGpus();
  if (inv.devices.empty()) {
    std::printf("SKIP: gpu_copy needs a GPU: %s\n", inv.detail.c_str());
    return 0;
  }
  std::printf("gpu_copy on %s\n", inv.detail.c_str());
  auto engine = CudaCopyEngine::Create(0);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  CopyEngine& e = **engine;
  auto sync = [&](const CopyBatch& b) {
    absl::Status s = e.CopySync(b);
    if (!s.ok()) {
      std::fprintf(stderr, "copy: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  };
  cudaStream_t stream;
  Check(cudaStreamCreate(&stream), "cudaStreamCreate");
  std::vector<Row> rows;
  auto report = [&](const std::string& name, double bytes, double s, double base_s) {
    rows.push_back({name, bytes / s / 1e9, bytes / base_s / 1e9});
    std::printf("  %-44s %7.2f GB/s  baseline %7.2f GB/s  %.2fx\n", name.c_str(), bytes / s / 1e9,
                bytes / base_s / 1e9, base_s / s);
  };

  // Llama-3.1-8B geometry: 2 MiB blocks of 64 chunks of 32 KiB.
  absl::StatusOr<EngineLayout> layout =
      EngineLayout::Create(EngineLayoutKind::kVllmNhd, {32, 2 * blocks, 16, 8, 128, 2});
  const size_t block_bytes = layout->block_bytes();
  const size_t bytes = size_t(blocks) * block_bytes;

  // Pinned host arena and device pool, each with room for 2x the blocks.
  void *host = nullptr, *dev = nullptr, *host_contig = nullptr, *dev_contig = nullptr;
  Check(cudaMalloc(&dev, 2 * bytes), "cudaMalloc");
  Check(cudaMalloc(&dev_contig, bytes), "cudaMalloc");
  Check(cudaHostAlloc(&host_contig, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  host = std::malloc(2 * bytes);
  if (!e.RegisterHost(host, 2 * bytes).ok()) return 1;

  const double contig_h2d = BestSeconds(
      rounds,
      [&] {
        Check(cudaMemcpyAsync(dev_contig, host_contig, bytes, cudaMemcpyHostToDevice, stream),
              "h2d");
        Check(cudaStreamSynchronize(stream), "sync");
      },
      /*warm_up=*/true);
  const double contig_d2h = BestSeconds(
      rounds,
      [&] {
        Check(cudaMemcpyAsync(host_contig, dev_contig, bytes, cudaMemcpyDeviceToHost, stream),
              "d2h");
        Check(cudaStreamSynchronize(stream), "sync");
      },
      /*warm_up=*/true);
  const double contig_d2d = BestSeconds(
      rounds,
      [&] {
        Check(cudaMemcpyAsync(dev, dev_contig, bytes, cudaMemcpyDeviceToDevice, stream), "d2d");
        Check(cudaStreamSynchronize(stream), "sync");
      },
      /*warm_up=*/true);

  // Whole blocks, every other slot on both sides.
  CopyBatch h2d{MemoryKind::kHost, MemoryKind::kDevice, 0, {}},
      d2h{MemoryKind::kDevice, MemoryKind::kHost, 0, {}};
  for (int i = 0; i < blocks; ++i) {
    auto* h = static_cast<uint8_t*>(host) + 2 * i * block_bytes;
    auto* d = static_cast<uint8_t*>(dev) + (2 * i + 1) * block_bytes;
    h2d.ops.push_back({d, h, block_bytes});
    d2h.ops.push_back({h, d, block_bytes});
  }
  report("block copies host->device (2 MiB blocks)", bytes,
         BestSeconds(
             rounds, [&] { sync(h2d); }, /*warm_up=*/true),
         contig_h2d);
  report("block copies device->host (2 MiB blocks)", bytes,
         BestSeconds(
             rounds, [&] { sync(d2h); }, /*warm_up=*/true),
         contig_d2h);

  // Gather/scatter from per-layer device tensors.
  std::vector<void*> tensors;
  for (int l = 0; l < layout->num_tensors(); ++l) {
    void* t = nullptr;
    Check(cudaMalloc(&t, layout->tensor_bytes()), "cudaMalloc");
    tensors.push_back(t);
  }
  std::vector<int64_t> ids;
  for (int b = 0; b < blocks; ++b) ids.push_back(2 * b);
  const CopyBatch gather_d2h{MemoryKind::kDevice, MemoryKind::kHost, 0,
                             *PlanGather(*layout, tensors, ids, host)};
  const CopyBatch scatter_h2d{MemoryKind::kHost, MemoryKind::kDevice, 0,
                              *PlanScatter(*layout, tensors, ids, host)};
  const CopyBatch gather_d2d{MemoryKind::kDevice, MemoryKind::kDevice, 0,
                             *PlanGather(*layout, tensors, ids, dev)};
  const CopyBatch scatter_d2d{MemoryKind::kDevice, MemoryKind::kDevice, 0,
                              *PlanScatter(*layout, tensors, ids, dev)};
  report("gather 2x32 chunks of 32 KiB, device->host", bytes,
         BestSeconds(
             rounds, [&] { sync(gather_d2h); }, /*warm_up=*/true),
         contig_d2h);
  report("scatter 2x32 chunks of 32 KiB, host->device", bytes,
         BestSeconds(
             rounds, [&] { sync(scatter_h2d); }, /*warm_up=*/true),
         contig_h2d);
  report("gather, device->device (copy kernel)", bytes,
         BestSeconds(
             rounds, [&] { sync(gather_d2d); }, /*warm_up=*/true),
         contig_d2d);
  report("scatter, device->device (copy kernel)", bytes,
         BestSeconds(
             rounds, [&] { sync(scatter_d2d); }, /*warm_up=*/true),
         contig_d2d);

  // The copy kernel alone, its descriptors already on the device: the gap to
  // the row above is what the engine adds per batch (descriptor upload and
  // allocation, event, completion thread).
  std::vector<DeviceCopyDesc> kernel_descs;
  for (const CopyOp& op : gather_d2d.ops) {
    kernel_descs.push_back(
        {reinterpret_cast<uint64_t>(op.dst), reinterpret_cast<uint64_t>(op.src), op.bytes});
  }
  const size_t desc_bytes = kernel_descs.size() * sizeof(DeviceCopyDesc);
  DeviceCopyDesc* resident_descs = nullptr;
  Check(cudaMalloc(reinterpret_cast<void**>(&resident_descs), desc_bytes), "cudaMalloc");
  Check(cudaMemcpy(resident_descs, kernel_descs.data(), desc_bytes, cudaMemcpyHostToDevice),
        "cudaMemcpy");
  report("gather, device->device (kernel alone)", bytes,
         BestSeconds(
             rounds,
             [&] {
               Check(LaunchCopyKernel(resident_descs, kernel_descs.size(), stream), "kernel");
               Check(cudaStreamSynchronize(stream), "sync");
             },
             /*warm_up=*/true),
         contig_d2d);

  // fp8: bytes read + written against a device-to-device copy's (2 x bytes).
  absl::StatusOr<fp8::Geometry> geo = MakeFp8Geometry(*layout, Fp8Format{KvDtype::kBf16, 16, 0});
  void* enc = nullptr;
  Check(cudaMalloc(&enc, geo->encoded_bytes * blocks), "cudaMalloc");
  Check(cudaMemset(dev, 0x3c, bytes), "cudaMemset");  // bf16 ~1.0-ish values
  const double hbm_s = contig_d2d;
  const double moved = double(bytes) + double(geo->encoded_bytes) * blocks;
  const double enc_s = BestSeconds(
      rounds,
      [&] {
        if (!EncodeFp8OnDevice(0, *geo, dev, enc, blocks).ok()) std::exit(1);
      },
      /*warm_up=*/true);
  const double dec_s = BestSeconds(
      rounds,
      [&] {
        if (!DecodeFp8OnDevice(0, *geo, enc, dev, blocks).ok()) std::exit(1);
      },
      /*warm_up=*/true);
  rows.push_back({"fp8 encode (read+write)", moved / enc_s / 1e9, 2.0 * bytes / hbm_s / 1e9});
  rows.push_back({"fp8 decode (read+write)", moved / dec_s / 1e9, 2.0 * bytes / hbm_s / 1e9});
  for (size_t i = rows.size() - 2; i < rows.size(); ++i) {
    std::printf("  %-44s %7.2f GB/s  HBM (d2d copy, read+write) %7.2f GB/s  %.2fx\n",
                rows[i].name.c_str(), rows[i].gbps, rows[i].baseline_gbps,
                rows[i].gbps / rows[i].baseline_gbps);
  }
  std::printf("{\"device\": \"%s\", \"blocks\": %d, \"block_bytes\": %zu, \"rows\": [",
              inv.detail.c_str(), blocks, block_bytes);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::printf("%s{\"name\": \"%s\", \"gbps\": %.3f, \"baseline_gbps\": %.3f, \"ratio\": %.3f}",
                i ? ", " : "", rows[i].name.c_str(), rows[i].gbps, rows[i].baseline_gbps,
                rows[i].gbps / rows[i].baseline_gbps);
  }
  std::printf("]}\n");
  e.UnregisterHost(host).IgnoreError();
  return 0;
}
