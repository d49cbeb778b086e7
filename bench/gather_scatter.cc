// bench/gather_scatter: the CPU copy engine gathering engine KV blocks out of
// a vLLM per-layer layout (2 x L chunks of 32 KiB per block, Llama-3.1-8B
// geometry) into the daemon's contiguous block format, and scattering them
// back, against a plain memcpy of the same total bytes between contiguous
// buffers in the same run. Prints GB/s and the ratio to memcpy.
//
//   build/bench/gather_scatter [--layers 32] [--blocks 32] [--rounds 5] [--threads 0]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/best_seconds.h"
#include "datapath/cpu_copy_engine.h"
#include "datapath/engine_layout.h"

namespace {

using kvtier::bench::BestSeconds;

using Clock = std::chrono::steady_clock;

}  // namespace

int main(int argc, char** argv) {
  using namespace kvtier;
  int layers = 32, blocks = 32, rounds = 5, threads = 0;
  CLI::App app{"CPU copy engine gather/scatter against memcpy"};
  app.add_option("--layers", layers, "model layers")->check(CLI::PositiveNumber);
  app.add_option("--blocks", blocks, "blocks per round")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "rounds (the best is reported)")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "copy threads (0: the engine's default)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  // Twice as many blocks in the engine as we move, every other one moved.
  absl::StatusOr<EngineLayout> layout =
      EngineLayout::Create(EngineLayoutKind::kVllmNhd, {layers, 2 * blocks, 16, 8, 128, 2});
  if (!layout.ok()) {
    std::fprintf(stderr, "%s\n", layout.status().ToString().c_str());
    return 2;
  }
  std::vector<std::vector<uint8_t>> tensors(layout->num_tensors(),
                                            std::vector<uint8_t>(layout->tensor_bytes(), 1));
  std::vector<void*> bases;
  for (auto& t : tensors) bases.push_back(t.data());
  std::vector<int64_t> ids;
  for (int b = 0; b < blocks; ++b) ids.push_back(2 * b);
  const size_t bytes = size_t(blocks) * layout->block_bytes();
  std::vector<uint8_t> staging(bytes, 2), a(bytes, 3), b(bytes, 4);

  auto engine = CpuCopyEngine::Create(threads);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 2;
  }
  auto one = CpuCopyEngine::Create(1);
  const auto gather = *PlanGather(*layout, bases, ids, staging.data());
  const auto scatter = *PlanScatter(*layout, bases, ids, staging.data());
  const CopyBatch gather_batch{MemoryKind::kHost, MemoryKind::kHost, 0, gather};
  const CopyBatch scatter_batch{MemoryKind::kHost, MemoryKind::kHost, 0, scatter};
  const CopyBatch contiguous{
      MemoryKind::kHost, MemoryKind::kHost, 0, {{b.data(), a.data(), bytes}}};
  auto run = [&](CopyEngine& e, const CopyBatch& batch) {
    if (!e.CopySync(batch).ok()) std::abort();
  };
  const double memcpy_s = BestSeconds(rounds, [&] { std::memcpy(b.data(), a.data(), bytes); });
  const double contiguous_s = BestSeconds(rounds, [&] { run(**engine, contiguous); });
  const double gather1_s = BestSeconds(rounds, [&] { run(**one, gather_batch); });
  const double gather_s = BestSeconds(rounds, [&] { run(**engine, gather_batch); });
  const double scatter_s = BestSeconds(rounds, [&] { run(**engine, scatter_batch); });
  const double gb = bytes / 1e9;
  std::printf("gather_scatter: %d blocks of %d x %llu-byte chunks (%.1f MiB), %d worker(s)\n",
              blocks, layout->chunks_per_block(),
              static_cast<unsigned long long>(layout->chunk_bytes()), bytes / 1048576.0,
              (*engine)->Capabilities().worker_threads);
  std::printf("  baseline memcpy (1 thread, contiguous) %7.2f GB/s\n", gb / memcpy_s);
  std::printf("  engine, contiguous                      %7.2f GB/s  %.2fx memcpy\n",
              gb / contiguous_s, memcpy_s / contiguous_s);
  std::printf("  gather, 1 worker                        %7.2f GB/s  %.2fx memcpy\n",
              gb / gather1_s, memcpy_s / gather1_s);
  std::printf("  gather                                  %7.2f GB/s  %.2fx memcpy\n", gb / gather_s,
              memcpy_s / gather_s);
  std::printf("  scatter                                 %7.2f GB/s  %.2fx memcpy\n",
              gb / scatter_s, memcpy_s / scatter_s);
  return 0;
}
