#include "storage/nvme/nvme_tier.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "spdlog/spdlog.h"
#include "storage/nvme/slot_header.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<NvmeTier>> NvmeTier::Open(const NvmeTierOptions& options,
                                                         uint64_t max_block_bytes,
                                                         uint64_t host_slab_bytes,
                                                         absl::Span<uint8_t> arena, Clock* clock) {
  if (options.store.slab_bytes < max_block_bytes + kSlotHeaderBytes) {
    return absl::InvalidArgumentError(
        "nvme slab size must hold the largest block plus its 4 KiB slot header");
  }
  // Parsed once: the mover compares the enum.
  ASSIGN_OR_RETURN(WritePolicy policy, ParseWritePolicy(options.write_policy));
  if (!(options.host_low_watermark < options.host_high_watermark &&
        options.host_high_watermark <= 1) ||
      !(options.nvme_low_watermark < options.nvme_high_watermark &&
        options.nvme_high_watermark <= 1)) {
    return absl::InvalidArgumentError("nvme watermarks must satisfy 0 <= low < high <= 1");
  }
  const DemotionRule rule{.policy = policy,
                          .write_through_hits = options.write_through_hits,
                          .admit_min_uses = options.admit_min_uses,
                          .host_high_watermark = options.host_high_watermark,
                          .host_low_watermark = options.host_low_watermark};
  std::unique_ptr<NvmeTier> tier(new NvmeTier(options, rule));
  RETURN_IF_ERROR(tier->DoOpen(host_slab_bytes, arena, clock));
  return tier;
}

absl::Status NvmeTier::DoOpen(uint64_t host_slab_bytes, absl::Span<uint8_t> arena, Clock* clock) {
  const NvmeTierOptions& nvme = options_;
  IoEngine* engine = nvme.engine_for_testing;
  if (engine == nullptr) {
    ASSIGN_OR_RETURN(std::unique_ptr<IoEngine> created, CreateIoEngine(nvme.io, &io_engine_note_));
    io_engine_ = std::move(created);
    engine = io_engine_.get();
  } else {
    io_engine_note_ = absl::StrCat(engine->name(), " (injected)");
  }
  if (nvme.register_arena && kArenaBufferBytes % host_slab_bytes != 0) {
    spdlog::warn(
        "nvme tier: not registering the host arena: its slab size ({}) does not divide "
        "1 GiB, so a slot could straddle two fixed buffers",
        host_slab_bytes);
  } else if (nvme.register_arena && engine->capabilities().registered_files) {
    // Fixed buffers of at most 1 GiB (the kernel's limit per buffer); slots
    // never straddle two, as slabs divide 1 GiB.
    std::vector<absl::Span<uint8_t>> chunks;
    for (uint64_t off = 0; off < arena.size(); off += kArenaBufferBytes) {
      chunks.emplace_back(arena.data() + off,
                          std::min<uint64_t>(kArenaBufferBytes, arena.size() - off));
    }
    absl::StatusOr<int> first = engine->RegisterBuffers(chunks);
    if (first.ok() && engine->capabilities().registered_buffers) {
      arena_buffer_ = *first;
      absl::StrAppend(&io_engine_note_, ", host arena registered");
    } else {
      spdlog::warn(
          "nvme tier: cannot register the host arena with the io engine ({}); using "
          "plain buffers",
          first.ok() ? "not supported" : std::string(first.status().message()));
    }
  }
  // The catalog first: a directory another daemon holds, or a filesystem too
  // full to open it, fails the start before any slot file is created or
  // grown.
  if (nvme.store.dirs.empty())
    return absl::InvalidArgumentError("nvme tier needs a data directory");
  const std::string catalog_dir =
      nvme.catalog_dir.empty() ? nvme.store.dirs.front() + "/catalog" : nvme.catalog_dir;
  if (std::error_code ec;
      !std::filesystem::create_directories(std::filesystem::path(catalog_dir).parent_path(), ec) &&
      ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create the directory of catalog '", catalog_dir, "': ", ec.message()));
  }
  std::error_code exists_error;
  const bool catalog_existed = std::filesystem::exists(catalog_dir, exists_error);
  ASSIGN_OR_RETURN(std::unique_ptr<Catalog> catalog, Catalog::Open(catalog_dir));
  catalog_ = std::move(catalog);
  absl::StatusOr<std::unique_ptr<NvmeStore>> store = NvmeStore::Open(nvme.store, engine);
  if (!store.ok()) {
    // A catalog this start created holds nothing: a failed start leaves the
    // disk as it found it (the store removes the slot files it created).
    catalog_.reset();
    if (!catalog_existed && !exists_error) {
      std::error_code ec;
      std::filesystem::remove_all(catalog_dir, ec);
    }
    return store.status();
  }
  store_ = std::move(*store);
  for (const std::string& dir : nvme.store.dirs) {
    WearOptions w = nvme.wear;
    if (w.capacity_bytes == 0) {
      struct statvfs st;
      if (statvfs(dir.c_str(), &st) == 0) {
        w.capacity_bytes = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
      }
    }
    wear_.push_back(std::make_unique<WearBudget>(w, clock));
  }
  spdlog::info("nvme tier: {} device(s), io engine {}, catalog {}", nvme.store.dirs.size(),
               io_engine_note_, catalog_dir);
  return absl::OkStatus();
}

std::unique_ptr<BlockRecord> RecoveredRecord(const CatalogEntry& e) {
  auto rec = std::make_unique<BlockRecord>();
  rec->ns = e.ns;
  rec->key = e.key;
  rec->size = e.payload_bytes;
  rec->checksum = e.checksum;
  rec->in_host = false;
  rec->on_nvme = true;
  rec->nvme = NvmeSlot{e.device, {e.offset, e.size_class}};
  rec->nvme_sequence = e.sequence;
  rec->uses = 1;
  return rec;
}

RecoveryResult ReplayIntoIndex(CatalogReplay& replay, PrefixIndex* index,
                               absl::FunctionRef<bool(const CatalogEntry&)> admit,
                               absl::FunctionRef<void(const CatalogEntry&)> drop) {
  if (replay.size() == 0) return replay.Run(admit, drop);
  for (const auto& [ns, count] : replay.CountsByNamespace()) {
    index->Reserve(ns, index->CountIn(ns) + count);
  }
  index->BeginBulkLoad();
  const RecoveryResult result =
      replay.Run(admit, drop, [&](const CatalogEntry& e) { index->PrefetchInsert(e.ns, e.key); });
  index->EndBulkLoad();
  index->ReleaseUnusedRoom();
  return result;
}

absl::StatusOr<RecoveryResult> NvmeTier::Recover(
    PrefixIndex* index, uint64_t max_block_bytes,
    absl::FunctionRef<void(const CatalogEntry&)> on_recovered) {
  ASSIGN_OR_RETURN(CatalogReplay replay, CatalogReplay::Read(*catalog_));
  const RecoveryResult result = ReplayIntoIndex(
      replay, index,
      [&](const CatalogEntry& e) {
        const NvmeSlot slot{e.device, {e.offset, e.size_class}};
        // A block larger than this run's limit could never be promoted.
        if (e.payload_bytes == 0 || e.payload_bytes > max_block_bytes) return false;
        if (!store_->Claim(slot, e.sequence).ok()) return false;
        if (!index->Insert(RecoveredRecord(e), e.parent).ok()) {
          store_->Free(slot);
          return false;
        }
        AddBlock(e.payload_bytes);
        on_recovered(e);
        return true;
      },
      [&](const CatalogEntry& e) { catalog_->Delete(e.ns, e.key).IgnoreError(); });
  if (replay.size() > 0 || result.dropped > 0) {
    spdlog::info("nvme tier: recovered {} blocks from the catalog, dropped {}", result.recovered,
                 result.dropped);
  }
  return result;
}

void NvmeTier::AddBlock(uint64_t bytes) {
  stored_bytes_ += bytes;
  blocks_ += 1;
}

void NvmeTier::Forget(const BlockRecord& record) {
  stored_bytes_ -= record.size;
  blocks_ -= 1;
  // Unsynced: an entry that survives a crash is verified against its slot.
  catalog_->Delete(record.ns, record.key).IgnoreError();
}

void NvmeTier::NoteReadFailure(const absl::Status& status) {
  degraded_ = status.code() != absl::StatusCode::kDataLoss;
  last_error_ = std::string(status.message());
}

void NvmeTier::NoteWriteFailure(absl::string_view message) {
  degraded_ = true;
  last_error_ = std::string(message);
}

NvmeSnapshot NvmeTier::Snapshot() {
  NvmeSnapshot n;
  n.enabled = true;
  n.io_engine = io_engine_note_;
  n.write_policy = std::string(WritePolicyName(rule_.policy));
  n.degraded = degraded_;
  n.last_error = last_error_;
  n.devices = store_->Stats();
  for (const NvmeDeviceStats& d : n.devices) {
    n.tier.capacity_bytes += d.capacity_bytes;
    n.tier.used_bytes += d.used_bytes;
  }
  n.tier.stored_bytes = stored_bytes_;
  n.tier.blocks = blocks_;
  return n;
}

std::vector<DeviceWear> NvmeTier::Wear() const {
  std::vector<DeviceWear> out;
  for (size_t i = 0; i < wear_.size(); ++i) {
    const std::string& dir = options_.store.dirs[i];
    out.push_back({dir, wear_[i]->options(), wear_[i]->Report(), ReadSmartHealth(dir)});
  }
  return out;
}

}  // namespace kvtier
