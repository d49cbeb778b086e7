// bench/nvme_store: NVMe tier slot write and read throughput (NvmeStore over
// the io_uring engine, queue depth 32, O_DIRECT) for 256 KiB, 1 MiB and
// 2 MiB blocks, against fio doing the same I/O in the same run:
//  - the same operations: one write (read) of header + payload per block at
//    the store's slot stride (fio's bs is the op size, `rw=write:GAP` skips to
//    the next slot), the same number of them, queue depth 32, io_uring with
//    registered files (and fixed buffers with --register true), O_DIRECT;
//  - the same sync count: the store ends each batch of --batch blocks with
//    fdatasync (a block counts as written only once durable), fio runs with
//    --fdatasync=BATCH --end_fsync=1. One difference stays: the store waits
//    for a batch's writes before its sync, fio's io_uring engine queues the
//    sync behind writes still in flight (which can only help fio);
//  - the same file state: each side writes a fresh file preallocated with
//    fallocate (unwritten extents, as NvmeStore::Open leaves them), then
//    reads back what it just wrote;
//  - the page cache is not involved (O_DIRECT on both); a virtual disk's host
//    may cache the just-written data, for both sides alike;
//  - the same kind of buffer memory: the store's payload buffers are a
//    HostArena advised for transparent huge pages, as the daemon's host tier
//    is (host_tier.huge_pages), and fio's are malloc'd under
//    GLIBC_TUNABLES=glibc.malloc.hugetlb=1, which advises them the same way.
//    Each base page of a buffer is a DMA segment of its own and a device
//    takes a bounded number of segments per request, so an op into 4 KiB
//    pages can become several device requests where one into huge pages is
//    one; the device rows printed at the end show the requests of each side.
// The store also skips the tail of each 64 MiB slab that no whole slot fits
// (under 0.5% of the span), fio does not. With --register true the store
// moves header and payload as two ops per block (a fixed-buffer payload op
// and a header op), fio as one: that mode is not the same ops, and says so.
// Rates count payload bytes; the ratio is fio's time over the store's for the
// same operations. Each figure is the median of --reps runs, ours and fio's
// interleaved, the first side alternating (the disks here are virtualised
// and noisy). A ratio well above 1 means the baseline is not the limit.
//
//   build/bench/nvme_store [--dir DIR] [--mib-per-size 1024] [--batch 256] [--reps 3]
//                          [--register true]   (payload buffers as io_uring fixed buffers)
//                          [--huge-pages false] (both sides' buffers in base pages)
#include "storage/nvme/nvme_store.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/checksum.h"
#include "base/status_macros.h"
#include "bench/disk_stats.h"
#include "nlohmann/json.hpp"
#include "storage/host_arena.h"
#include "storage/nvme/uring/uring_io_engine.h"

namespace kvtier {
namespace {

using Clock = std::chrono::steady_clock;

// One fio run of `ops` operations of `op_bytes` each, `stride` apart, from
// offset 0 of a fresh file fio-baseline.dat under `dir` (read: the file a
// write run left). Returns its seconds, or -1.
struct FioJob {
  std::string dir;
  bool write = true;
  uint64_t op_bytes = 0;
  uint64_t stride = 0;
  uint64_t ops = 0;
  size_t fdatasync = 0;  // writes: fdatasync after this many (0: never)
  bool fixed_buffers = false;
  bool huge_pages = true;  // malloc advises transparent huge pages
};

double Fio(const FioJob& job) {
  const char* rw = job.write ? "write" : "read";
  // glibc.malloc.hugetlb=1: fio's malloc'd buffers are advised for
  // transparent huge pages, as the store's are (see the top).
  std::string cmd = absl::StrCat("GLIBC_TUNABLES=glibc.malloc.hugetlb=", job.huge_pages ? 1 : 0,
                                 " fio --name=kvtier --directory=", job.dir,
                                 " --filename=fio-baseline.dat --rw=", rw);
  if (job.stride > job.op_bytes) absl::StrAppend(&cmd, ":", job.stride - job.op_bytes);
  absl::StrAppend(&cmd, " --bs=", job.op_bytes, " --size=", job.ops * job.stride,
                  " --io_size=", job.ops * job.op_bytes,
                  " --iodepth=32 --ioengine=io_uring --registerfiles=1 --direct=1"
                  " --fallocate=native --numjobs=1 --output-format=json");
  if (job.fixed_buffers) absl::StrAppend(&cmd, " --fixedbufs=1");
  // fio syncs after every `fdatasync` writes but not after the last batch;
  // end_fsync syncs it, as the store does.
  if (job.write && job.fdatasync > 0) {
    absl::StrAppend(&cmd, " --fdatasync=", job.fdatasync, " --end_fsync=1");
  }
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) {
    std::fprintf(stderr, "fio failed: %s\n%s\n", cmd.c_str(), out.c_str());
    return -1;
  }
  // fio may print notes before its JSON.
  const size_t brace = out.find('{');
  auto j =
      nlohmann::json::parse(brace == std::string::npos ? out : out.substr(brace), nullptr, false);
  if (j.is_discarded()) return -1;
  const auto& side = j["jobs"][0][rw];
  if (side["total_ios"].get<uint64_t>() != job.ops) {
    std::fprintf(stderr, "fio did %llu ops, not %llu: %s\n",
                 static_cast<unsigned long long>(side["total_ios"].get<uint64_t>()),
                 static_cast<unsigned long long>(job.ops), cmd.c_str());
    return -1;
  }
  return j["jobs"][0]["job_runtime"].get<double>() / 1e3;
}

struct StoreRun {
  double write_seconds = 0;
  double read_seconds = 0;
  uint64_t stride = 0;  // bytes from one slot to the next in a slab
  // What reached the device in each phase (where /proc/diskstats has it).
  std::optional<DiskStats> write_io, read_io;
};

std::optional<DiskStats> Delta(const std::optional<DiskStats>& before, const std::string& dir) {
  std::optional<DiskStats> after = DiskStats::Of(dir);
  if (!before || !after) return std::nullopt;
  return *after - *before;
}

// Writes `count` blocks of `block` bytes into a fresh NvmeStore under
// dir/store in batches of `batch` (each ending with fdatasync), then reads
// and verifies them in the same batches.
absl::StatusOr<StoreRun> RunStore(IoEngine* engine, const std::string& dir, uint64_t block,
                                  uint64_t count, size_t batch, bool reg, bool huge) {
  std::filesystem::remove_all(dir + "/store");
  NvmeStoreOptions o;
  o.dirs = {dir + "/store"};
  // Slots are header + payload rounded up to a size class: room for every
  // block plus slack.
  o.slab_bytes = 64ull << 20;
  o.bytes_per_dir = (count + 64) * (block + block / 4 + kSlotHeaderBytes) + o.slab_bytes;
  o.bytes_per_dir = (o.bytes_per_dir / o.slab_bytes + 1) * o.slab_bytes;
  ASSIGN_OR_RETURN(std::unique_ptr<NvmeStore> store, NvmeStore::Open(o, engine));
  // One payload buffer per block in a batch, in memory like the daemon's.
  ASSIGN_OR_RETURN(std::unique_ptr<HostArena> arena,
                   HostArena::Create(batch * block, huge ? HostArena::Pages::kTransparentHuge
                                                         : HostArena::Pages::kBase));
  uint8_t* buf = arena->data();
  for (uint64_t i = 0; i < batch * block; ++i) buf[i] = static_cast<uint8_t>(i * 2654435761u >> 11);
  int buffer = -1;
  if (reg) {
    ASSIGN_OR_RETURN(buffer, engine->RegisterBuffers({absl::Span<uint8_t>(buf, batch * block)}));
  }
  std::vector<NvmeWrite> all;
  NamespaceSpec spec{"bench", KvLayout{1, 1, 128, DType::kBf16, 16, 0, 1}, "", "", "", {}};
  const NamespaceId ns = NamespaceId::Of(spec);
  for (uint64_t i = 0; i < count; ++i) {
    SlotHeader h;
    h.ns = ns;
    h.key = *BlockKey::Create(absl::StrCat("b", i));
    h.payload_bytes = block;
    h.payload_checksum = Checksum64(absl::MakeConstSpan(buf + (i % batch) * block, block));
    h.sequence = store->NextSequence();
    ASSIGN_OR_RETURN(NvmeSlot slot, store->Allocate(block));
    all.push_back({slot, h, buf + (i % batch) * block, buffer});
  }
  StoreRun run;
  run.stride = count > 1 ? all[1].slot.slot.offset - all[0].slot.slot.offset : block;
  std::optional<DiskStats> io = DiskStats::Of(dir);
  auto t0 = Clock::now();
  for (uint64_t i = 0; i < count; i += batch) {
    const size_t n = std::min<uint64_t>(batch, count - i);
    for (const absl::Status& s : store->Write(absl::MakeConstSpan(all).subspan(i, n))) {
      RETURN_IF_ERROR(s);
    }
  }
  run.write_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  run.write_io = Delta(io, dir);
  std::vector<NvmeRead> reads;
  for (uint64_t i = 0; i < count; ++i) {
    reads.push_back({all[i].slot, all[i].header, buf + (i % batch) * block, buffer});
  }
  io = DiskStats::Of(dir);
  t0 = Clock::now();
  for (uint64_t i = 0; i < count; i += batch) {
    const size_t n = std::min<uint64_t>(batch, count - i);
    for (const absl::Status& s : store->Read(absl::MakeConstSpan(reads).subspan(i, n))) {
      RETURN_IF_ERROR(s);
    }
  }
  run.read_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  run.read_io = Delta(io, dir);
  store.reset();
  std::filesystem::remove_all(dir + "/store");
  return run;
}

// fio writes then reads the same operations as `store` did.
absl::StatusOr<StoreRun> RunFio(const std::string& dir, uint64_t block, uint64_t count,
                                size_t batch, bool reg, bool huge, uint64_t stride) {
  std::filesystem::remove(dir + "/fio-baseline.dat");
  FioJob job{dir, true, kSlotHeaderBytes + block, stride, count, batch, reg, huge};
  StoreRun run;
  run.stride = stride;
  std::optional<DiskStats> io = DiskStats::Of(dir);
  run.write_seconds = Fio(job);
  run.write_io = Delta(io, dir);
  job.write = false;
  io = DiskStats::Of(dir);
  run.read_seconds = run.write_seconds > 0 ? Fio(job) : -1;
  run.read_io = Delta(io, dir);
  std::filesystem::remove(dir + "/fio-baseline.dat");
  if (run.write_seconds <= 0 || run.read_seconds <= 0) return absl::InternalError("fio failed");
  return run;
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
  app.add_option("--reps", reps, "repetitions (the median is reported)")
      ->check(CLI::PositiveNumber);
  uint64_t only_kib = 0;
  app.add_option("--block-kib", only_kib, "measure this block size only (KiB, a multiple of 4)")
      ->check(CLI::PositiveNumber);
  app.add_option("--register", reg, "register the payload buffers as fixed buffers (true|false)");
  bool huge = true;
  app.add_option("--huge-pages", huge,
                 "both sides' buffers advised for transparent huge pages (true|false)");
  CLI11_PARSE(app, argc, argv);
  if (only_kib % 4 != 0) {
    std::fprintf(stderr, "nvme_store bench: --block-kib %llu is not a multiple of 4\n",
                 static_cast<unsigned long long>(only_kib));
    return 2;
  }
  std::vector<uint64_t> sizes = {uint64_t{256} << 10, uint64_t{1} << 20, uint64_t{2} << 20};
  if (only_kib > 0) sizes = {only_kib << 10};
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
      "NvmeStore vs fio on %s: the same ops (header + payload per block at the slot stride), "
      "QD 32, io_uring, O_DIRECT, fdatasync every %zu blocks, fresh fallocated files, "
      "buffers %s (transparent huge pages: %s), %llu MiB per size, median of %d\n",
      dir.c_str(), batch, huge ? "advised for huge pages" : "in base pages",
      HostArena::TransparentHugePageMode().c_str(), static_cast<unsigned long long>(mib), reps);
  std::printf("%-8s %8s %9s %9s %7s | %9s %9s %7s\n", "block", "stride", "write", "fio", "w/fio",
              "read", "fio", "r/fio");
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  bool above_limit = false;
  std::vector<std::string> device_rows;
  for (uint64_t block : sizes) {
    const uint64_t count = total / block;
    if (count < 2) {
      std::fprintf(
          stderr, "nvme_store bench: --mib-per-size %llu holds fewer than 2 blocks of %llu KiB\n",
          static_cast<unsigned long long>(mib), static_cast<unsigned long long>(block >> 10));
      return 2;
    }
    std::vector<double> ws, rs, fws, frs;
    uint64_t stride = 0;
    for (int rep = 0; rep < reps; ++rep) {
      absl::StatusOr<StoreRun> ours, fio;
      if (rep % 2 == 0) {
        ours = RunStore(engine->get(), dir, block, count, batch, reg, huge);
        if (ours.ok()) fio = RunFio(dir, block, count, batch, reg, huge, ours->stride);
      } else {
        fio = RunFio(dir, block, count, batch, reg, huge, stride);
        if (fio.ok()) ours = RunStore(engine->get(), dir, block, count, batch, reg, huge);
      }
      if (!ours.ok() || !fio.ok()) {
        std::fprintf(stderr, "nvme_store bench: %s\n",
                     std::string((ours.ok() ? fio : ours).status().message()).c_str());
        return 1;
      }
      stride = ours->stride;
      if (rep == reps - 1 && ours->write_io && fio->write_io && ours->read_io && fio->read_io) {
        auto row = [&](const char* who, const DiskStats& w, const DiskStats& r) {
          device_rows.push_back(absl::StrFormat(
              "%-8s %-5s %8llu %9.1f %8llu | %8llu %9.1f", absl::StrCat(block >> 10, "KiB"), who,
              static_cast<unsigned long long>(w.writes), w.write_sectors / 2048.0,
              static_cast<unsigned long long>(w.flushes), static_cast<unsigned long long>(r.reads),
              r.read_sectors / 2048.0));
        };
        row("store", *ours->write_io, *ours->read_io);
        row("fio", *fio->write_io, *fio->read_io);
      }
      ws.push_back(ours->write_seconds);
      rs.push_back(ours->read_seconds);
      fws.push_back(fio->write_seconds);
      frs.push_back(fio->read_seconds);
    }
    const double bytes = static_cast<double>(count * block);
    const double w = median(ws), r = median(rs), fw = median(fws), fr = median(frs);
    above_limit = above_limit || fw / w > 1.1 || fr / r > 1.1;
    std::printf("%-8s %8s %9.0f %9.0f %7.2f | %9.0f %9.0f %7.2f\n",
                absl::StrCat(block >> 10, "KiB").c_str(), absl::StrCat(stride >> 10, "KiB").c_str(),
                bytes / w / 1e6, bytes / fw / 1e6, fw / w, bytes / r / 1e6, bytes / fr / 1e6,
                fr / r);
    std::fflush(stdout);
  }
  std::printf("(MB/s of payload; ratios are fio's time / NvmeStore's for the same ops)\n");
  if (!device_rows.empty()) {
    std::printf(
        "\nwhat reached the device (/proc/diskstats, last rep; other processes' I/O "
        "included):\n%-8s %-5s %8s %9s %8s | %8s %9s\n",
        "block", "side", "writes", "MiB", "flushes", "reads", "MiB");
    for (const std::string& r : device_rows) std::printf("%s\n", r.c_str());
  }
  if (reg) {
    std::printf(
        "note: --register true: the store issues two ops per block (payload, header), fio one; "
        "not the same ops\n");
  }
  if (above_limit) {
    std::printf(
        "note: a ratio above 1.1 means fio was slower than the store at the same ops: noise on "
        "this disk, or a baseline that is not the limit; rerun with more --reps\n");
  }
  return 0;
}
