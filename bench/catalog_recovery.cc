// bench/catalog_recovery: how fast a restarted daemon rebuilds its NVMe
// index from the catalog. Writes N catalog entries (batches of 10,000, each
// synced), closes the catalog, then times reopen + Catalog::ForEach (decode
// every record) + claiming every slot in a SlabAllocator, which is the
// recovery path. Baseline in the same run: reopen + a raw RocksDB iteration
// over a copy of the same database in the same state (as a clean close
// left it), touching keys and values only.
//
//   build/bench/catalog_recovery [--blocks 1000000] [--dir build/catalog-bench]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/raw_catalog_scan.h"
#include "storage/nvme/catalog.h"
#include "storage/slab_allocator.h"

int main(int argc, char** argv) {
  using namespace kvtier;
  using Clock = std::chrono::steady_clock;
  uint64_t blocks = 1'000'000;
  std::string dir = "build/catalog-bench";
  CLI::App app{"Catalog recovery: reopen + ForEach of N entries"};
  app.add_option("--blocks", blocks, "catalog entries to write")->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "directory for the catalog (removed first)");
  CLI11_PARSE(app, argc, argv);
  std::filesystem::remove_all(dir);
  NamespaceSpec spec{"bench", KvLayout{32, 8, 128, DType::kBf16, 16, 0, 1}, "", "", "", {}};
  const NamespaceId ns = NamespaceId::Of(spec);
  constexpr uint64_t kSlot = 2ull << 20;   // 2 MiB blocks
  constexpr uint64_t kSlab = 64ull << 20;  // 32 slots per slab
  auto alloc = *SlabAllocator::Create(blocks * kSlot + kSlab, kSlab);
  const uint32_t cls = *alloc->ClassFor(kSlot);
  {
    auto cat = Catalog::Open(dir);
    if (!cat.ok()) return 1;
    std::vector<CatalogEntry> batch;
    auto t0 = Clock::now();
    for (uint64_t i = 0; i < blocks; ++i) {
      CatalogEntry e;
      e.ns = ns;
      e.key = *BlockKey::Create(absl::StrCat("block-key-", i, "-pad").substr(0, 16));
      if (i % 64 != 0) {
        e.parent = *BlockKey::Create(absl::StrCat("block-key-", i - 1, "-pad").substr(0, 16));
      }
      e.offset = i * kSlot;
      e.size_class = cls;
      e.payload_bytes = kSlot - 4096;
      e.checksum = i * 0x9e3779b97f4a7c15ull;
      e.sequence = i + 1;
      batch.push_back(e);
      if (batch.size() == 10'000 || i + 1 == blocks) {
        if (!(*cat)->PutBatch(batch).ok()) return 1;
        batch.clear();
      }
    }
    std::printf("wrote %llu entries in %.2f s\n", static_cast<unsigned long long>(blocks),
                std::chrono::duration<double>(Clock::now() - t0).count());
  }
  // The baseline reads a copy in the same state (as the clean close left
  // it), so neither side inherits the other's reopen work.
  const std::string raw_dir = dir + "-raw";
  std::filesystem::remove_all(raw_dir);
  std::filesystem::copy(dir, raw_dir, std::filesystem::copy_options::recursive);
  // Recovery path.
  auto t0 = Clock::now();
  uint64_t seen = 0, bad = 0;
  {
    auto cat = Catalog::Open(dir);
    if (!cat.ok()) return 1;
    absl::Status s = (*cat)->ForEach(
        [&](const CatalogEntry& e) {
          ++seen;
          return alloc->AllocateAt({e.offset, e.size_class});
        },
        &bad);
    if (!s.ok()) {
      std::fprintf(stderr, "recovery: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  const double ours = std::chrono::duration<double>(Clock::now() - t0).count();
  // Baseline: raw iteration.
  t0 = Clock::now();
  const int64_t scanned = bench::RawCatalogScan(raw_dir);
  if (scanned < 0) return 1;
  const uint64_t raw = static_cast<uint64_t>(scanned);
  const double base = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("recovery (open + decode + claim): %llu blocks in %.3f s = %.2f M blocks/s%s\n",
              static_cast<unsigned long long>(seen), ours, seen / ours / 1e6,
              bad ? " (corrupt records found)" : "");
  std::printf("baseline (open + raw iterate):    %llu records in %.3f s = %.2f M records/s\n",
              static_cast<unsigned long long>(raw), base, raw / base / 1e6);
  std::printf("ratio ours/baseline time: %.2f   (target: 1M blocks in <= 2 s)\n", ours / base);
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(raw_dir);
  return (seen == blocks && raw == blocks) ? 0 : 1;
}
