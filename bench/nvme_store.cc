// bench/nvme_store: NVMe tier slot write and read throughput (NvmeStore over
// the io_uring engine, queue depth 32, O_DIRECT) for 256 KiB, 1 MiB and
// 2 MiB blocks, against fio in the same run on the same directory with the
// same block size, depth and engine. Each NvmeStore write batch ends with
// fdatasync (a block counts as written only once durable), so fio runs
// twice for writes: plain, and with --fdatasync equal to the batch size.
// Slot writes carry a 4 KiB header per block; reads verify header and
// checksum. Prints MB/s and the ratios.
//
// Each figure is the median of --reps runs, ours and fio's interleaved (the
// disks here are virtualised and noisy).
//
//   build/bench/nvme_store [--dir DIR] [--mib-per-size 1024] [--batch 256] [--reps 3]
//                          [--register true]   (payload buffers as io_uring fixed buffers)
#include "storage/nvme/nvme_store.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "base/checksum.h"
#include "nlohmann/json.hpp"
#include "storage/nvme/uring/uring_io_engine.h"

namespace kvtier {
namespace {

using Clock = std::chrono::steady_clock;

// Runs fio and returns bytes/s for the job's direction, or -1.
double Fio(const std::string& dir, const std::string& rw, uint64_t block, uint64_t bytes,
           int fdatasync) {
  std::string cmd =
      absl::StrCat("fio --name=kvtier --directory=", dir, " --filename=fio-baseline.dat --rw=", rw,
                   " --bs=", block, " --iodepth=32 --ioengine=io_uring --direct=1 --size=", bytes,
                   " --numjobs=1 --output-format=json");
  if (fdatasync > 0) absl::StrAppend(&cmd, " --fdatasync=", fdatasync);
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return -1;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) return -1;
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded()) return -1;
  const char* side = rw == "read" ? "read" : "write";
  return j["jobs"][0][side]["bw_bytes"].get<double>();
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  using namespace kvtier;
  std::string dir = "build/nvme-bench";
  uint64_t mib = 1024;
  size_t batch = 256;
  int reps = 3;
  bool reg = false;  // register the payload buffers as io_uring fixed buffers
  CLI::App app{"NvmeStore slot writes and reads against fio"};
  app.add_option("--dir", dir, "directory on the device to measure");
  app.add_option("--mib-per-size", mib, "MiB per block size")->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "slots per batch")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "repetitions (the best is reported)")->check(CLI::PositiveNumber);
  app.add_option("--register", reg, "register the payload buffers as fixed buffers (true|false)");
  CLI11_PARSE(app, argc, argv);
  if (std::system("fio --version >/dev/null 2>&1") != 0) {
    std::fprintf(stderr, "nvme_store bench: the fio baseline is missing (apt-get install fio)\n");
    return 2;
  }
  auto engine = CreateUringIoEngine(32);
  if (!engine.ok()) {
    std::fprintf(stderr, "nvme_store bench: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  const uint64_t total = mib << 20;
  std::filesystem::create_directories(dir);
  std::printf(
      "NvmeStore (io_uring, QD 32, O_DIRECT, %zu blocks per batch + fdatasync) vs fio on %s, "
      "%llu MiB per size, median of %d\n",
      batch, dir.c_str(), static_cast<unsigned long long>(mib), reps);
  std::printf("%-8s %9s %9s %9s %7s %7s | %9s %9s %7s\n", "block", "write", "fio", "fio+sync",
              "w/fio", "w/sync", "read", "fio", "r/fio");
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (uint64_t block : {uint64_t{256} << 10, uint64_t{1} << 20, uint64_t{2} << 20}) {
    std::vector<double> ws, rs, fws, fwss, frs;
    for (int rep = 0; rep < reps; ++rep) {
      const uint64_t count = total / block;
      std::filesystem::remove_all(dir + "/store");
      NvmeStoreOptions o;
      o.dirs = {dir + "/store"};
      // Slots are header + payload: room for every block plus slack.
      o.bytes_per_dir = (count + 64) * (block + 64 * 1024) + (64ull << 20);
      o.slab_bytes = 64ull << 20;
      o.bytes_per_dir = (o.bytes_per_dir / o.slab_bytes + 1) * o.slab_bytes;
      auto store = NvmeStore::Open(o, engine->get());
      if (!store.ok()) {
        std::fprintf(stderr, "%s\n", std::string(store.status().message()).c_str());
        return 1;
      }
      // One payload buffer per block in a batch.
      uint8_t* buf = static_cast<uint8_t*>(std::aligned_alloc(kIoAlignment, batch * block));
      for (uint64_t i = 0; i < batch * block; ++i)
        buf[i] = static_cast<uint8_t>(i * 2654435761u >> 11);
      int buffer = -1;
      if (reg) {
        auto idx = (*engine)->RegisterBuffers({absl::Span<uint8_t>(buf, batch * block)});
        if (!idx.ok()) {
          std::fprintf(stderr, "register: %s\n", std::string(idx.status().message()).c_str());
          return 1;
        }
        buffer = *idx;
      }
      std::vector<NvmeWrite> all;
      NamespaceSpec spec{"bench", KvLayout{1, 1, 128, DType::kBf16, 16, 0, 1}, "", "", ""};
      const NamespaceId ns = NamespaceId::Of(spec);
      for (uint64_t i = 0; i < count; ++i) {
        SlotHeader h;
        h.ns = ns;
        h.key = *BlockKey::Create(absl::StrCat("b", i));
        h.payload_bytes = block;
        h.payload_checksum = Checksum64(absl::MakeConstSpan(buf + (i % batch) * block, block));
        h.sequence = (*store)->NextSequence();
        all.push_back({*(*store)->Allocate(block), h, buf + (i % batch) * block, buffer});
      }
      auto t0 = Clock::now();
      for (uint64_t i = 0; i < count; i += batch) {
        const size_t n = std::min<uint64_t>(batch, count - i);
        for (const absl::Status& s : (*store)->Write(absl::MakeConstSpan(all).subspan(i, n))) {
          if (!s.ok()) {
            std::fprintf(stderr, "write: %s\n", std::string(s.message()).c_str());
            return 1;
          }
        }
      }
      const double write_bps =
          static_cast<double>(total) / std::chrono::duration<double>(Clock::now() - t0).count();
      std::vector<NvmeRead> reads;
      for (uint64_t i = 0; i < count; ++i) {
        reads.push_back({all[i].slot, all[i].header, buf + (i % batch) * block, buffer});
      }
      t0 = Clock::now();
      for (uint64_t i = 0; i < count; i += batch) {
        const size_t n = std::min<uint64_t>(batch, count - i);
        for (const absl::Status& s : (*store)->Read(absl::MakeConstSpan(reads).subspan(i, n))) {
          if (!s.ok()) {
            std::fprintf(stderr, "read: %s\n", std::string(s.message()).c_str());
            return 1;
          }
        }
      }
      const double read_bps =
          static_cast<double>(total) / std::chrono::duration<double>(Clock::now() - t0).count();
      store->reset();
      std::free(buf);
      std::filesystem::remove_all(dir + "/store");
      const double fio_w = Fio(dir, "write", block, total, 0);
      const double fio_ws = Fio(dir, "write", block, total, static_cast<int>(batch));
      const double fio_r = Fio(dir, "read", block, total, 0);
      std::filesystem::remove(dir + "/fio-baseline.dat");
      if (fio_w <= 0 || fio_ws <= 0 || fio_r <= 0) {
        std::fprintf(stderr, "fio failed\n");
        return 1;
      }
      ws.push_back(write_bps);
      rs.push_back(read_bps);
      fws.push_back(fio_w);
      fwss.push_back(fio_ws);
      frs.push_back(fio_r);
    }
    const double write_bps = median(ws), read_bps = median(rs), fio_w = median(fws),
                 fio_ws = median(fwss), fio_r = median(frs);
    std::printf("%-8s %9.0f %9.0f %9.0f %7.2f %7.2f | %9.0f %9.0f %7.2f\n",
                absl::StrCat(block >> 10, "KiB").c_str(), write_bps / 1e6, fio_w / 1e6,
                fio_ws / 1e6, write_bps / fio_w, write_bps / fio_ws, read_bps / 1e6, fio_r / 1e6,
                read_bps / fio_r);
    std::fflush(stdout);
  }
  std::printf("(MB/s; ratios are NvmeStore / fio)\n");
  return 0;
}
