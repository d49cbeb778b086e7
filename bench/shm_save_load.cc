// bench/shm_save_load: Save and Load through a registered shared-memory
// region over a real gRPC connection (unix socket) to an in-process kvtierd,
// for 256 KiB, 1 MiB and 4 MiB blocks, against the machine's copy limit for
// the same bytes in the same run, in each one's direction: the best of
// block-sized copies (memcpy and streaming-store copies) between the same
// staging region and a warmed buffer of the host tier's kind (huge pages
// advised) over 1..N threads (bench/memcpy_limit.h; N = the cores here):
// "to tier" from the staging region, Save's limit, and "from tier" into it,
// Load's (reading huge pages and writing base pages is not the same copy
// as the reverse). Each thread count as many rounds as Save and Load get,
// each round of the limits run just before a round of Save and Load.
// Prints GB/s, the thread count and copy kind that reached each limit, and
// the ratios to them. Beside them, as a reference and not the target, the
// same copies in each direction with the XXH3-64 block checksum fused in
// ("c+h to" and "c+h from" the tier, the best of one and two threads, as
// the daemon copies a group, and of the rounds, interleaved like the
// limits): what the daemon's copy itself can reach here, so the gap to the
// limit splits into the checksum's cost (limit against c+h) and the
// daemon's own (c+h against Save or Load).
//
//   build/bench/shm_save_load [--mib 256] [--rounds 5] [--block-kib 256|1024|4096]
//                             [--completion-per-block] [--blocks-per-call 64]
//                             [--huge-pages true|false]
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/bench_daemon.h"
#include "bench/memcpy_limit.h"
#include "kvtier/shared_region.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "spdlog/spdlog.h"
#include "storage/host_arena.h"

namespace {

using WallClock = std::chrono::steady_clock;

double Seconds(WallClock::time_point a, WallClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kvtier;
  uint64_t mib = 256;
  int rounds = 5;
  uint64_t only_block = 0;  // --block-kib: measure one block size only
  CLI::App app{"Save/Load through shared memory against memcpy"};
  app.add_option("--mib", mib, "MiB per block size")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "rounds (the best is reported)")->check(CLI::PositiveNumber);
  uint64_t only_block_kib = 0;
  app.add_option("--block-kib", only_block_kib, "measure this block size only (KiB)")
      ->check(CLI::PositiveNumber);
  uint64_t per_call = 64;
  app.add_option("--blocks-per-call", per_call, "blocks per Save or Load call")
      ->check(CLI::PositiveNumber);
  bool one_per_block = false;
  app.add_flag("--completion-per-block", one_per_block,
               "one completion message per block (as before completion runs)");
  bool huge_pages = true;
  app.add_option("--huge-pages", huge_pages,
                 "the daemon's host_tier.huge_pages, and the limit's destination pages alike "
                 "(true|false)");
  CLI11_PARSE(app, argc, argv);
  only_block = only_block_kib << 10;
  spdlog::set_level(spdlog::level::warn);
  const uint64_t region_bytes = mib << 20;
  char dir_tmpl[] = "/tmp/kvtier-bench-XXXXXX";
  const std::string dir = mkdtemp(dir_tmpl);
  DaemonConfig c = DefaultConfig(16ull << 30);
  c.listen = "unix:" + dir + "/kvtier.sock";
  c.metrics_listen = "off";
  c.host_tier_bytes = region_bytes + (256ull << 20);
  c.host_slab_bytes = 64ull << 20;
  c.max_block_bytes = 4ull << 20;
  c.costmodel_probe_tiers = false;
  c.host_huge_pages = huge_pages;
  auto daemon = Daemon::Start(c);
  if (!daemon.ok()) {
    std::fprintf(stderr, "start: %s\n", daemon.status().ToString().c_str());
    return 1;
  }
  grpc::ChannelArguments args;
  auto kv = v1::KvCache::NewStub(grpc::CreateCustomChannel(
      (*daemon)->listen_address(), grpc::InsecureChannelCredentials(), args));
  // The engine's staging region: a 0600 file in /dev/shm, mapped here too.
  auto staging = client::SharedRegion::Create(2 * region_bytes);
  if (!staging.ok()) {
    std::fprintf(stderr, "%s\n", staging.status().ToString().c_str());
    return 1;
  }
  const std::string& path = (*staging)->path();
  uint8_t* mem = (*staging)->data();
  for (uint64_t i = 0; i < 2 * region_bytes; ++i) mem[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
  std::string region_id;
  {
    v1::RegisterMemoryRequest req;
    req.mutable_region()->mutable_shared_memory()->set_path(path);
    req.mutable_region()->mutable_shared_memory()->set_size_bytes(2 * region_bytes);
    v1::RegisterMemoryResponse resp;
    grpc::ClientContext ctx;
    if (!kv->RegisterMemory(&ctx, req, &resp).ok()) return 1;
    region_id = resp.region_id();
  }
  // The limit's destination is memory of the host tier's kind (a HostArena
  // advised for transparent huge pages, as host_tier.huge_pages makes the
  // daemon's): the same page sizes as Save's destination and Load's source.
  auto copy_dst = HostArena::Create(
      region_bytes, huge_pages ? HostArena::Pages::kTransparentHuge : HostArena::Pages::kBase);
  if (!copy_dst.ok()) {
    std::fprintf(stderr, "shm_save_load: %s\n", copy_dst.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "shm_save_load: %llu MiB per round, %d rounds, best round reported, host tier and the "
      "limit's destination in %s\n",
      static_cast<unsigned long long>(mib), rounds,
      (*daemon)->cache().host_huge_pages() ? "huge-page-advised memory" : "base pages");
  std::printf("%10s %10s %10s %10s %10s %10s %10s %10s %10s %10s %10s %10s %10s\n", "block",
              "to tier", "how", "from tier", "how", "Save GB/s", "Load GB/s", "Save/copy",
              "Load/copy", "c+h to", "c+h from", "Save/c+h", "Load/c+h");
  const int max_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int exit_code = 0;
  for (uint64_t block : {uint64_t{256} << 10, uint64_t{1} << 20, uint64_t{4} << 20}) {
    if (only_block != 0 && block != only_block) continue;
    const uint64_t n = region_bytes / block;
    if (n == 0) {
      std::fprintf(stderr, "shm_save_load: --mib %llu holds no %llu KiB block\n",
                   static_cast<unsigned long long>(mib),
                   static_cast<unsigned long long>(block >> 10));
      return 2;
    }
    const std::string ns = bench::OpenBlockNamespace(*kv, absl::StrCat("bench-", block), block);
    if (ns.empty()) return 1;
    double best_save = 1e30, best_load = 1e30;
    uint64_t failures = 0;
    bench::MemcpyLimit save_limit, load_limit, save_fused, load_fused;
    for (int r = 0; r < rounds; ++r) {
      // The limit's rounds interleave with Save's and Load's, so the three
      // see the same machine (a shared VM's speed drifts within a run).
      // Save's direction (staging to host tier), then Load's (host tier to
      // staging), whose warm-up copy is wiped before Load must write it.
      const bench::MemcpyLimit to_tier =
          bench::BestMemcpy(mem, (*copy_dst)->data(), n * block, block, 1, max_threads);
      if (to_tier.gbps > save_limit.gbps) save_limit = to_tier;
      const bench::MemcpyLimit from_tier = bench::BestMemcpy(
          (*copy_dst)->data(), mem + region_bytes, n * block, block, 1, max_threads);
      if (from_tier.gbps > load_limit.gbps) load_limit = from_tier;
      // The fused copy-and-hash references, in the same directions.
      const bench::MemcpyLimit fused_to =
          bench::BestCopyAndHash(mem, (*copy_dst)->data(), n * block, block, 2, max_threads);
      if (fused_to.gbps > save_fused.gbps) save_fused = fused_to;
      const bench::MemcpyLimit fused_from = bench::BestCopyAndHash(
          (*copy_dst)->data(), mem + region_bytes, n * block, block, 2, max_threads);
      if (fused_from.gbps > load_fused.gbps) load_fused = fused_from;
      std::memset(mem + region_bytes, 0, region_bytes);
      // Fresh keys each round so Save really stores (older rounds are evicted).
      auto transfer = [&](bool save) {
        const auto t0 = WallClock::now();
        for (uint64_t first = 0; first < n; first += per_call) {
          grpc::ClientContext ctx;
          std::unique_ptr<grpc::ClientReader<v1::BlockCompletion>> reader;
          auto fill = [&](auto& req) {
            req.set_namespace_id(ns);
            req.set_region_id(region_id);
            for (uint64_t i = first; i < std::min(n, first + per_call); ++i) {
              v1::BlockRef* b = req.add_blocks();
              b->set_key(absl::StrCat("r", r, "b", i));
              if (save && i > 0) b->set_parent_key(absl::StrCat("r", r, "b", i - 1));
              b->set_offset((save ? 0 : region_bytes) + i * block);
              b->set_size_bytes(block);
            }
          };
          if (save) {
            v1::SaveRequest req;
            fill(req);
            req.set_completion_runs(!one_per_block);
            reader = kv->Save(&ctx, req);
          } else {
            v1::LoadRequest req;
            fill(req);
            req.set_completion_runs(!one_per_block);
            reader = kv->Load(&ctx, req);
          }
          v1::BlockCompletion c;
          uint64_t reported = 0;  // blocks the completions stand for
          while (reader->Read(&c)) {
            reported += std::max<uint32_t>(c.run(), 1);
            if (c.code() != 0 && ++failures == 1) {
              std::fprintf(stderr, "block %u: %s\n", c.index(), c.message().c_str());
            }
          }
          if (!reader->Finish().ok()) exit_code = 1;
          if (reported != std::min<uint64_t>(per_call, n - first)) {
            std::fprintf(stderr, "%llu completions for %llu blocks\n",
                         static_cast<unsigned long long>(reported),
                         static_cast<unsigned long long>(std::min<uint64_t>(per_call, n - first)));
            exit_code = 1;
          }
        }
        return Seconds(t0, WallClock::now());
      };
      best_save = std::min(best_save, transfer(true));
      best_load = std::min(best_load, transfer(false));
      if (std::memcmp(mem, mem + region_bytes, n * block) != 0) {
        std::fprintf(stderr, "loaded bytes differ from saved bytes\n");
        exit_code = 1;
      }
      std::memset(mem + region_bytes, 0, region_bytes);
      // Drop the round's chain so the next round stores afresh.
      v1::DeleteRequest del;
      del.set_namespace_id(ns);
      del.add_keys(absl::StrCat("r", r, "b", 0));
      del.set_recursive(true);
      v1::DeleteResponse deleted;
      grpc::ClientContext ctx;
      if (!kv->Delete(&ctx, del, &deleted).ok() || deleted.blocks_deleted() != n) {
        std::fprintf(stderr, "cleanup deleted %u of %llu blocks\n", deleted.blocks_deleted(),
                     static_cast<unsigned long long>(n));
        exit_code = 1;
      }
    }
    if (failures > 0) {
      std::fprintf(stderr, "%llu block failures\n", static_cast<unsigned long long>(failures));
      exit_code = 1;
    }
    const double gb = static_cast<double>(n * block) / 1e9;
    auto how = [](const bench::MemcpyLimit& l) {
      return absl::StrCat(l.threads, "t ", l.streaming ? "stream" : "memcpy");
    };
    std::printf(
        "%9lluK %10.2f %10s %10.2f %10s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n",
        static_cast<unsigned long long>(block >> 10), save_limit.gbps, how(save_limit).c_str(),
        load_limit.gbps, how(load_limit).c_str(), gb / best_save, gb / best_load,
        gb / best_save / save_limit.gbps, gb / best_load / load_limit.gbps, save_fused.gbps,
        load_fused.gbps, gb / best_save / save_fused.gbps, gb / best_load / load_fused.gbps);
  }
  staging->reset();
  (*daemon)->Shutdown(absl::Seconds(1));
  std::string sock = dir + "/kvtier.sock";
  unlink(sock.c_str());
  rmdir(dir.c_str());
  return exit_code;
}
