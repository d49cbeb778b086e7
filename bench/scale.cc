// bench/scale: how the index's costs grow with the number of cached blocks,
// at 10^4, 10^5, 10^6 and 10^7 blocks (each decade in its own child process,
// so one decade's memory does not blur the next). Blocks are NVMe-resident
// records (chains of --chain blocks, 16-byte keys, 4 KiB payloads): the
// index does not hold payload bytes, so 10^7 of them fit this machine.
// For each decade, in the same run:
//  - Lookup: p50/p99 of a --chain-key prefix walk (PrefixIndex::MatchChain,
//    then Touch per block, what BlockCache::Lookup does under its lock) on
//    random chains, against finds of the same keys in a bare
//    absl::flat_hash_map<BlockKey, uint64_t> (the baseline, which grows with
//    cache misses alone);
//  - memory: heap bytes per block of the index and the NVMe slot allocator
//    (glibc mallinfo2, before and after building them), against the bare
//    map's bytes per entry; the process's RSS;
//  - restart: the catalog recovery path (reopen the RocksDB catalog, read
//    it, replay parents before children, claim each slot and index each
//    block, as NvmeTier::Recover does) against a raw RocksDB iteration of
//    a copy of the same database in the same state (closed cleanly, so
//    flushed: the restart after a clean stop; a crash's log replay is not
//    measured here). The daemon's own NVMe
//    files are not opened: their preallocation for 10^7 slots would not fit this machine's disk.
// Prints a table with the growth factor per decade. "read s" is the part of
// the recovery spent reopening the catalog and decoding its entries (the
// rest orders them and indexes each block); "raw s" is the baseline.
//
//   build/bench/scale [--max-blocks 10000000] [--chain 128] [--lookups 20000]
//                     [--dir build/scale-bench]
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "bench/raw_catalog_scan.h"
#include "spdlog/spdlog.h"
#include "storage/nvme/catalog.h"
#include "storage/nvme/nvme_tier.h"
#include "storage/nvme/recovery.h"
#include "storage/prefix_index.h"
#include "storage/slab_allocator.h"

namespace kvtier {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  uint64_t max_blocks = 10'000'000;
  uint64_t chain = 128;
  uint64_t lookups = 20'000;
  std::string dir = "build/scale-bench";
};

// What one decade measured; sent from the child to the parent as bytes.
struct Decade {
  uint64_t blocks = 0;
  double lookup_p50_us = 0, lookup_p99_us = 0;
  double bare_p50_us = 0, bare_p99_us = 0;
  double index_bytes_per_block = 0;
  double bare_bytes_per_entry = 0;
  double rss_mib = 0;
  double recovery_s = 0;
  double recovery_read_s = 0;  // of which: reopen the catalog and decode every entry
  double raw_iterate_s = 0;
  uint64_t recovered = 0;
  bool ok = false;
};

constexpr uint64_t kPayload = 4096;
constexpr uint64_t kSlab = 64ull << 20;

// In use on the heap: arena chunks plus mmapped large blocks.
uint64_t HeapBytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

double RssMib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

BlockKey KeyOf(uint64_t i) {
  char raw[16];
  std::memcpy(raw, &i, 8);
  const uint64_t mixed = i * 0x9e3779b97f4a7c15ull;
  std::memcpy(raw + 8, &mixed, 8);
  return *BlockKey::Create(absl::string_view(raw, 16));
}

// The keys of chain `c`, built before the clock starts on either side.
void ChainKeys(uint64_t c, uint64_t chain, std::vector<BlockKey>* keys) {
  keys->clear();
  for (uint64_t k = 0; k < chain; ++k) keys->push_back(KeyOf(c * chain + k));
}

CatalogEntry EntryOf(const NamespaceId& ns, uint64_t i, uint64_t chain, uint32_t size_class,
                     uint64_t slot_bytes) {
  CatalogEntry e;
  e.ns = ns;
  e.key = KeyOf(i);
  if (i % chain != 0) e.parent = KeyOf(i - 1);
  e.offset = i * slot_bytes;
  e.size_class = size_class;
  e.payload_bytes = kPayload;
  e.checksum = i * 0x2545f4914f6cdd1dull;
  e.sequence = i + 1;
  return e;
}

std::pair<double, double> P50P99(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() * 99 / 100]};
}

Decade Measure(const Options& opt, uint64_t n) {
  Decade d;
  d.blocks = n;
  NamespaceSpec spec{"scale", KvLayout{1, 1, 128, DType::kBf16, 16, 0, 1}, "", "", "", {}};
  const NamespaceId ns = NamespaceId::Of(spec);
  const uint64_t chains = n / opt.chain;
  std::mt19937_64 rng(n);
  std::vector<uint64_t> sample(opt.lookups);
  for (uint64_t& c : sample) c = rng() % chains;

  // Lookup and memory: the index and the slot allocator.
  {
    const uint64_t heap0 = HeapBytes();
    auto alloc = SlabAllocator::Create(n * (2 * kPayload) + kSlab, kSlab);
    if (!alloc.ok()) return d;
    const uint32_t cls = *(*alloc)->ClassFor(2 * kPayload);
    const uint64_t slot_bytes = (*alloc)->ClassBytes(cls);
    auto index = std::make_unique<PrefixIndex>();
    for (uint64_t i = 0; i < n; ++i) {
      const CatalogEntry e = EntryOf(ns, i, opt.chain, cls, slot_bytes);
      if (!(*alloc)->AllocateAt({e.offset, cls}).ok()) return d;
      if (!index->Insert(RecoveredRecord(e), e.parent).ok()) return d;
    }
    d.index_bytes_per_block = static_cast<double>(HeapBytes() - heap0) / n;
    d.rss_mib = RssMib();
    std::vector<double> us;
    us.reserve(sample.size());
    std::vector<BlockKey> keys;
    std::vector<BlockRecord*> found;
    found.reserve(opt.chain);
    for (uint64_t c : sample) {
      ChainKeys(c, opt.chain, &keys);
      found.clear();
      const auto t0 = Clock::now();
      index->MatchChain(ns, keys, &found);
      for (BlockRecord* r : found) index->Touch(r);
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      if (found.size() != opt.chain) return d;
    }
    std::tie(d.lookup_p50_us, d.lookup_p99_us) = P50P99(us);
  }
  // The baseline map: the same keys, a minimal value.
  {
    const uint64_t heap0 = HeapBytes();
    absl::flat_hash_map<BlockKey, uint64_t> bare;
    bare.reserve(n);
    for (uint64_t i = 0; i < n; ++i) bare[KeyOf(i)] = i;
    d.bare_bytes_per_entry = static_cast<double>(HeapBytes() - heap0) / n;
    std::vector<double> us;
    std::vector<BlockKey> keys;
    uint64_t sink = 0;
    for (uint64_t c : sample) {
      ChainKeys(c, opt.chain, &keys);
      const auto t0 = Clock::now();
      for (const BlockKey& k : keys) sink += bare.find(k)->second;
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    std::tie(d.bare_p50_us, d.bare_p99_us) = P50P99(us);
    if (sink == 42) return d;
  }
  // Restart: write the catalog, then recover it.
  const std::string path = absl::StrCat(opt.dir, "/catalog-", n);
  std::filesystem::remove_all(path);
  {
    auto probe = SlabAllocator::Create(kSlab, kSlab);
    const uint32_t cls = *(*probe)->ClassFor(2 * kPayload);
    const uint64_t slot_bytes = (*probe)->ClassBytes(cls);
    auto cat = Catalog::Open(path);
    if (!cat.ok()) return d;
    std::vector<CatalogEntry> batch;
    for (uint64_t i = 0; i < n; ++i) {
      batch.push_back(EntryOf(ns, i, opt.chain, cls, slot_bytes));
      if (batch.size() == 10'000 || i + 1 == n) {
        if (!(*cat)->PutBatch(batch).ok()) return d;
        batch.clear();
      }
    }
  }
  // The baseline reads a copy in the same state (as a clean stop left it),
  // so neither side inherits the other's reopen work.
  const std::string raw_path = path + "-raw";
  std::filesystem::remove_all(raw_path);
  std::filesystem::copy(path, raw_path, std::filesystem::copy_options::recursive);
  {
    const auto t0 = Clock::now();
    auto alloc = SlabAllocator::Create(n * (2 * kPayload) + kSlab, kSlab);
    auto index = std::make_unique<PrefixIndex>();
    auto cat = Catalog::Open(path);
    if (!alloc.ok() || !cat.ok()) return d;
    absl::StatusOr<CatalogReplay> replay = CatalogReplay::Read(**cat);
    if (!replay.ok()) return d;
    d.recovery_read_s = std::chrono::duration<double>(Clock::now() - t0).count();
    const RecoveryResult r = ReplayIntoIndex(
        *replay, index.get(),
        [&](const CatalogEntry& e) {
          if (!(*alloc)->AllocateAt({e.offset, e.size_class}).ok()) return false;
          return index->Insert(RecoveredRecord(e), e.parent).ok();
        },
        [](const CatalogEntry&) {});
    d.recovery_s = std::chrono::duration<double>(Clock::now() - t0).count();
    d.recovered = r.recovered;
  }
  {
    const auto t0 = Clock::now();
    const int64_t raw = bench::RawCatalogScan(raw_path);
    d.raw_iterate_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (raw != static_cast<int64_t>(n)) return d;
  }
  std::filesystem::remove_all(path);
  std::filesystem::remove_all(raw_path);
  d.ok = d.recovered == n;
  return d;
}

// Runs Measure(n) in a child process; its result comes back through a pipe.
bool MeasureInChild(const Options& opt, uint64_t n, Decade* out) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    close(fds[0]);
    const Decade d = Measure(opt, n);
    const ssize_t w = write(fds[1], &d, sizeof(d));
    _exit(w == static_cast<ssize_t>(sizeof(d)) ? 0 : 1);
  }
  close(fds[1]);
  size_t got = 0;
  while (got < sizeof(*out)) {
    const ssize_t r = read(fds[0], reinterpret_cast<char*>(out) + got, sizeof(*out) - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return got == sizeof(*out) && WIFEXITED(status) && WEXITSTATUS(status) == 0 && out->ok;
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  using namespace kvtier;
  Options opt;
  CLI::App app{"How Lookup latency, index memory and restart time grow with the block count"};
  app.add_option("--max-blocks", opt.max_blocks, "the largest decade (from 10^4 up)")
      ->check(CLI::Range(uint64_t{10'000}, uint64_t{100'000'000}));
  app.add_option("--chain", opt.chain, "blocks per chain (keys per Lookup)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{10'000}));
  app.add_option("--lookups", opt.lookups, "Lookups sampled per decade")
      ->check(CLI::PositiveNumber);
  app.add_option("--dir", opt.dir, "directory for the catalogs (removed after each decade)");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // the replay's progress bar
  std::filesystem::create_directories(opt.dir);
  // The heap's pages matter at 10^7 blocks (TLB reach): say which it has.
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  std::printf(
      "scale: chains of %llu blocks, %llu Lookups per decade, one thread; sizeof(BlockRecord) = "
      "%zu; GLIBC_TUNABLES=%s\n",
      static_cast<unsigned long long>(opt.chain), static_cast<unsigned long long>(opt.lookups),
      sizeof(BlockRecord), tunables != nullptr ? tunables : "(unset)");
  std::printf("%10s | %8s %8s %8s %8s | %9s %8s %8s | %9s %8s %8s\n", "blocks", "p50 us", "p99 us",
              "bare p50", "bare p99", "B/block", "bare B", "RSS MiB", "recover s", "(read s)",
              "raw s");
  std::vector<Decade> rows;
  for (uint64_t n = 10'000; n <= opt.max_blocks; n *= 10) {
    Decade d;
    if (!MeasureInChild(opt, n, &d)) {
      std::fprintf(stderr, "scale: the decade of %llu blocks failed\n",
                   static_cast<unsigned long long>(n));
      return 1;
    }
    std::printf("%10llu | %8.2f %8.2f %8.2f %8.2f | %9.1f %8.1f %8.0f | %9.3f %8.3f %8.3f\n",
                static_cast<unsigned long long>(n), d.lookup_p50_us, d.lookup_p99_us, d.bare_p50_us,
                d.bare_p99_us, d.index_bytes_per_block, d.bare_bytes_per_entry, d.rss_mib,
                d.recovery_s, d.recovery_read_s, d.raw_iterate_s);
    std::fflush(stdout);
    rows.push_back(d);
  }
  std::printf("\ngrowth per decade (this decade / the one before):\n%10s | %8s %8s %8s | %9s\n",
              "blocks", "p99", "bare p99", "B/block", "recover");
  for (size_t i = 1; i < rows.size(); ++i) {
    std::printf("%10llu | %8.2f %8.2f %8.2f | %9.2f\n",
                static_cast<unsigned long long>(rows[i].blocks),
                rows[i].lookup_p99_us / rows[i - 1].lookup_p99_us,
                rows[i].bare_p99_us / rows[i - 1].bare_p99_us,
                rows[i].index_bytes_per_block / rows[i - 1].index_bytes_per_block,
                rows[i].recovery_s / rows[i - 1].recovery_s);
  }
  const Decade& first = rows.front();
  const Decade& last = rows.back();
  std::printf(
      "\ntargets: Lookup p99 %llu -> %llu blocks grows %.2fx (target < 2x); index %.0f B/block "
      "(target <= 160); recovery of %llu blocks %.1f s (target <= 20 s at 10^7)\n",
      static_cast<unsigned long long>(first.blocks), static_cast<unsigned long long>(last.blocks),
      last.lookup_p99_us / first.lookup_p99_us, last.index_bytes_per_block,
      static_cast<unsigned long long>(last.blocks), last.recovery_s);
  return 0;
}
