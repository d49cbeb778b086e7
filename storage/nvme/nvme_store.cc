#include "storage/nvme/nvme_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/checksum.h"
#include "base/status_macros.h"

namespace kvtier {
namespace {

constexpr char kSlotFile[] = "kvtier-slots.dat";

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<uint8_t, AlignedFree>;

AlignedBytes AllocAligned(size_t n) {
  return AlignedBytes(static_cast<uint8_t*>(std::aligned_alloc(kIoAlignment, n)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<NvmeStore>> NvmeStore::Open(const NvmeStoreOptions& options,
                                                           IoEngine* engine) {
  if (options.dirs.empty()) return absl::InvalidArgumentError("nvme tier needs a data directory");
  std::unique_ptr<NvmeStore> store(new NvmeStore(engine));
  // Slot files this call created: a failed open removes them again, so a
  // start that fails (a full disk, say) leaves no partial file holding the
  // space behind. Files that were there before hold blocks and stay.
  std::vector<std::string> created;
  struct RemoveCreated {
    std::vector<std::string>* paths;
    ~RemoveCreated() {
      if (paths == nullptr) return;
      for (const std::string& p : *paths) unlink(p.c_str());
    }
  } remove_created{&created};
  for (const std::string& dir : options.dirs) {
    auto dev = std::make_unique<Device>();
    dev->dir = dir;
    ASSIGN_OR_RETURN(std::unique_ptr<SlabAllocator> alloc,
                     SlabAllocator::Create(options.bytes_per_dir, options.slab_bytes));
    dev->allocator = std::move(alloc);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("cannot create nvme data directory '", dir, "': ", ec.message()));
    }
    const std::string path = absl::StrCat(dir, "/", kSlotFile);
    struct stat before;
    const bool existed = stat(path.c_str(), &before) == 0;
    dev->fd = open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
    if (dev->fd < 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot open '", path, "' with O_DIRECT: ", std::strerror(errno)));
    }
    if (!existed) created.push_back(path);
    const uint64_t bytes = dev->allocator->capacity();
    if (fallocate(dev->fd, 0, 0, static_cast<off_t>(bytes)) != 0) {
      const int err = errno;
      // A file that was there keeps its size (and blocks); what the failed
      // call allocated past it is released. A new one is removed (above).
      if (existed) {
        const int rc = ftruncate(dev->fd, before.st_size);
        (void)rc;  // best effort: the start fails either way
      }
      close(dev->fd);
      return absl::ResourceExhaustedError(absl::StrCat(
          "nvme.dirs: cannot preallocate ", bytes, " bytes (nvme.bytes_per_dir) in '", path,
          "': ", std::strerror(err), existed ? "" : " (the partial file is removed)"));
    }
    // Make the file's directory entry durable too: catalog entries must never
    // outlive the file their slots live in.
    if (const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
      fsync(dfd);
      close(dfd);
    }
    absl::StatusOr<int> file = engine->RegisterFile(dev->fd);
    if (!file.ok()) {
      close(dev->fd);
      return absl::UnavailableError(
          absl::StrCat("cannot register '", path, "': ", file.status().message()));
    }
    dev->file = *file;
    store->devices_.push_back(std::move(dev));
  }
  remove_created.paths = nullptr;
  return store;
}

NvmeStore::~NvmeStore() {
  for (auto& d : devices_) {
    if (d->file >= 0) engine_->UnregisterFile(d->file).IgnoreError();
    if (d->fd >= 0) close(d->fd);
  }
}

absl::StatusOr<NvmeSlot> NvmeStore::Allocate(uint64_t payload_bytes) {
  const uint64_t slot_bytes = kSlotHeaderBytes + RoundUpToIo(payload_bytes);
  MutexLock lock(&mu_);
  std::vector<uint32_t> order(devices_.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const SlabAllocator& x = *devices_[a]->allocator;
    const SlabAllocator& y = *devices_[b]->allocator;
    return x.capacity() - x.used_bytes() > y.capacity() - y.used_bytes();
  });
  absl::Status last = absl::ResourceExhaustedError("nvme tier is full");
  for (uint32_t d : order) {
    SlabAllocator& alloc = *devices_[d]->allocator;
    ASSIGN_OR_RETURN(uint32_t cls, alloc.ClassFor(slot_bytes));
    if (std::optional<SlabAllocator::Slot> s = alloc.Allocate(cls)) return NvmeSlot{d, *s};
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("nvme tier has no free slot for a ", payload_bytes, "-byte block"));
}

void NvmeStore::Free(const NvmeSlot& slot) {
  MutexLock lock(&mu_);
  devices_[slot.device]->allocator->Free(slot.slot);
}

absl::Status NvmeStore::Claim(const NvmeSlot& slot, uint64_t sequence) {
  if (slot.device >= devices_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("no nvme device ", slot.device));
  }
  uint64_t next = next_sequence_.load();
  while (next <= sequence && !next_sequence_.compare_exchange_weak(next, sequence + 1)) {
  }
  MutexLock lock(&mu_);
  return devices_[slot.device]->allocator->AllocateAt(slot.slot);
}

std::vector<absl::Status> NvmeStore::Write(absl::Span<const NvmeWrite> writes) {
  std::vector<absl::Status> status(writes.size());
  AlignedBytes headers = AllocAligned(std::max<size_t>(writes.size(), 1) * kSlotHeaderBytes);
  std::vector<IoOp> ops;
  std::vector<size_t> first_op(writes.size());
  ops.reserve(writes.size() * 2);
  std::vector<bool> touched(devices_.size(), false);
  for (size_t i = 0; i < writes.size(); ++i) {
    const NvmeWrite& w = writes[i];
    const Device& dev = *devices_[w.slot.device];
    uint8_t* header = headers.get() + i * kSlotHeaderBytes;
    EncodeSlotHeader(w.header, absl::MakeSpan(header, kSlotHeaderBytes));
    uint8_t* payload = const_cast<uint8_t*>(w.payload);
    const uint64_t length = RoundUpToIo(w.header.payload_bytes);
    first_op[i] = ops.size();
    if (w.buffer < 0) {
      // Header and payload in one vectored write.
      ops.push_back({IoOp::Kind::kWrite, dev.file, w.slot.slot.offset, header, kSlotHeaderBytes, -1,
                     payload, length});
    } else {
      // A registered payload buffer: its own fixed-buffer write, then the header.
      ops.push_back({IoOp::Kind::kWrite, dev.file, w.slot.slot.offset + kSlotHeaderBytes, payload,
                     length, w.buffer});
      ops.push_back(
          {IoOp::Kind::kWrite, dev.file, w.slot.slot.offset, header, kSlotHeaderBytes, -1});
    }
    touched[w.slot.device] = true;
  }
  std::vector<absl::Status> results = engine_->Run(ops);
  std::vector<absl::Status> synced(devices_.size());
  for (size_t d = 0; d < devices_.size(); ++d) {
    if (touched[d]) synced[d] = engine_->Sync(devices_[d]->file);
  }
  for (size_t i = 0; i < writes.size(); ++i) {
    const NvmeWrite& w = writes[i];
    const size_t end = i + 1 < writes.size() ? first_op[i + 1] : ops.size();
    for (size_t j = first_op[i]; j < end && status[i].ok(); ++j) status[i] = results[j];
    if (status[i].ok()) status[i] = synced[w.slot.device];
    if (status[i].ok()) {
      devices_[w.slot.device]->bytes_written +=
          kSlotHeaderBytes + RoundUpToIo(w.header.payload_bytes);
    }
  }
  return status;
}

std::vector<absl::Status> NvmeStore::Read(absl::Span<const NvmeRead> reads) {
  std::vector<absl::Status> status(reads.size());
  AlignedBytes headers = AllocAligned(std::max<size_t>(reads.size(), 1) * kSlotHeaderBytes);
  // Each read is verified (header, then payload checksum) as soon as its
  // last op finishes, while later reads are still in flight: each op names
  // its read, and each read counts its ops still to finish.
  std::vector<IoOp> ops;
  std::vector<size_t> read_of_op;
  std::vector<uint8_t> ops_left(reads.size());
  ops.reserve(reads.size() * 2);
  read_of_op.reserve(reads.size() * 2);
  for (size_t i = 0; i < reads.size(); ++i) {
    const NvmeRead& r = reads[i];
    const Device& dev = *devices_[r.slot.device];
    uint8_t* header = headers.get() + i * kSlotHeaderBytes;
    const uint64_t length = RoundUpToIo(r.expect.payload_bytes);
    const size_t first = ops.size();
    if (r.buffer < 0) {
      // Header and payload in one vectored read.
      ops.push_back({IoOp::Kind::kRead, dev.file, r.slot.slot.offset, header, kSlotHeaderBytes, -1,
                     r.out, length});
    } else {
      ops.push_back(
          {IoOp::Kind::kRead, dev.file, r.slot.slot.offset, header, kSlotHeaderBytes, -1});
      ops.push_back({IoOp::Kind::kRead, dev.file, r.slot.slot.offset + kSlotHeaderBytes, r.out,
                     length, r.buffer});
    }
    ops_left[i] = static_cast<uint8_t>(ops.size() - first);
    read_of_op.resize(ops.size(), i);
  }
  auto verify = [&](size_t i) {
    const NvmeRead& r = reads[i];
    devices_[r.slot.device]->bytes_read += kSlotHeaderBytes + RoundUpToIo(r.expect.payload_bytes);
    absl::StatusOr<SlotHeader> h = DecodeSlotHeader(
        absl::MakeConstSpan(headers.get() + i * kSlotHeaderBytes, kSlotHeaderBytes));
    if (!h.ok()) return h.status();
    const SlotHeader& e = r.expect;
    if (!(h->ns == e.ns) || !(h->key == e.key) || !(h->parent == e.parent) ||
        h->payload_bytes != e.payload_bytes || h->payload_checksum != e.payload_checksum ||
        h->sequence != e.sequence) {
      return absl::DataLossError(absl::StrCat("nvme slot at device ", r.slot.device, " offset ",
                                              r.slot.slot.offset, " holds block ", h->key.ToHex(),
                                              " (sequence ", h->sequence, "), not block ",
                                              e.key.ToHex(), " (sequence ", e.sequence, ")"));
    }
    if (Checksum64(absl::MakeConstSpan(r.out, e.payload_bytes)) != e.payload_checksum) {
      return absl::DataLossError(
          absl::StrCat("nvme slot of block ", e.key.ToHex(), " failed its payload checksum"));
    }
    return absl::OkStatus();
  };
  engine_->RunNotifying(ops, [&](size_t op, const absl::Status& done) {
    const size_t i = read_of_op[op];
    if (status[i].ok()) status[i] = done;  // the first failure to be reported
    if (--ops_left[i] == 0 && status[i].ok()) status[i] = verify(i);
  });
  return status;
}

uint64_t NvmeStore::capacity_bytes() {
  MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& d : devices_) total += d->allocator->capacity();
  return total;
}

uint64_t NvmeStore::used_bytes() {
  MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& d : devices_) total += d->allocator->used_bytes();
  return total;
}

std::vector<NvmeDeviceStats> NvmeStore::Stats() {
  MutexLock lock(&mu_);
  std::vector<NvmeDeviceStats> out;
  for (const auto& d : devices_) {
    out.push_back({d->dir, d->allocator->capacity(), d->allocator->used_bytes(),
                   d->bytes_written.load(), d->bytes_read.load()});
  }
  return out;
}

}  // namespace kvtier
