#include "storage/block_cache.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/checksum.h"
#include "base/sigbus_guard.h"
#include "spdlog/spdlog.h"
#include "storage/tier_probe.h"

namespace kvtier {

// ---------------------------------------------------------------------------
// Creation and namespaces

absl::StatusOr<std::unique_ptr<BlockCache>> BlockCache::Create(const BlockCacheOptions& options,
                                                               Clock* clock) {
  if (options.max_block_bytes == 0 || options.max_block_bytes > options.slab_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("max_block_bytes (", options.max_block_bytes,
                                                   ") must be in 1..slab_bytes (",
                                                   options.slab_bytes, ")"));
  }
  if (options.max_keys_per_request == 0 || options.max_namespaces == 0) {
    return absl::InvalidArgumentError("max_keys_per_request and max_namespaces must be > 0");
  }
  if (options.default_lease_ttl <= absl::ZeroDuration() ||
      options.default_lease_ttl > options.max_lease_ttl) {
    return absl::InvalidArgumentError("default lease TTL must be in (0, max lease TTL]");
  }
  absl::StatusOr<std::unique_ptr<SlabAllocator>> allocator =
      SlabAllocator::Create(options.host_bytes, options.slab_bytes);
  if (!allocator.ok()) return allocator.status();
  absl::StatusOr<std::unique_ptr<HostArena>> arena = HostArena::Create((*allocator)->capacity());
  if (!arena.ok()) return arena.status();
  std::unique_ptr<BlockCache> cache(
      new BlockCache(options, clock, std::move(*arena), std::move(*allocator)));
  if (options.nvme.has_value()) {
    if (absl::Status s = cache->OpenNvme(*options.nvme); !s.ok()) return s;
    if (absl::Status s = cache->RecoverFromCatalog(); !s.ok()) return s;
    if (options.nvme->start_mover)
      cache->mover_ = std::thread([c = cache.get()] { c->MoverLoop(); });
  }
  if (options.probe_tiers) cache->ProbeTiers();
  return cache;
}

void BlockCache::ProbeTiers() {
  const TransferEstimate host = ProbeMemoryCopy(options_.probe_bytes);
  host_meter_.Seed(host.bytes_per_s, host.latency_s, "probe");
  spdlog::info("host tier probe: {:.2f} GB/s, {:.1f} us", host.bytes_per_s / 1e9,
               host.latency_s * 1e6);
  if (nvme_ == nullptr) return;
  const std::string& dir = options_.nvme->store.dirs.front();
  if (!wear_.empty() && !wear_.front()->TryConsume(options_.probe_bytes)) {
    spdlog::warn("nvme probe skipped: the write budget of {} is exhausted", dir);
    return;
  }
  absl::StatusOr<TransferEstimate> nvme = ProbeDirectRead(dir, options_.probe_bytes);
  if (!nvme.ok()) {
    spdlog::warn("nvme probe in {} failed: {}; the planner waits for real transfers", dir,
                 std::string(nvme.status().message()));
    return;
  }
  nvme_meter_.Seed(nvme->bytes_per_s, nvme->latency_s, "probe");
  spdlog::info("nvme tier probe ({}): {:.2f} GB/s, {:.1f} us", dir, nvme->bytes_per_s / 1e9,
               nvme->latency_s * 1e6);
}

absl::Status BlockCache::SetNvmeAdmission(const NamespaceId& ns, bool admit) {
  MutexLock lock(&mu_);
  auto it = namespaces_.find(ns);
  if (it == namespaces_.end()) {
    return absl::NotFoundError(absl::StrCat("namespace ", ns.ToHex(), " is not open"));
  }
  it->second.nvme_admit = admit;
  return absl::OkStatus();
}

BlockCache::BlockCache(const BlockCacheOptions& options, Clock* clock,
                       std::unique_ptr<HostArena> arena, std::unique_ptr<SlabAllocator> allocator)
    : options_(options),
      clock_(clock),
      arena_(std::move(arena)),
      allocator_(std::move(allocator)),
      quotas_([&] {
        TenantLimits limits = options.tenant;
        if (limits.max_namespaces == 0) limits.max_namespaces = options.max_namespaces;
        if (limits.max_leases == 0) limits.max_leases = options.max_leases;
        if (limits.max_reserved_bytes == 0) limits.max_reserved_bytes = options.host_bytes;
        return limits;
      }()) {}

BlockCache::~BlockCache() {
  {
    MutexLock lock(&mu_);
    stop_mover_ = true;
  }
  if (mover_.joinable()) mover_.join();
}

absl::Status BlockCache::OpenNvme(const NvmeTierOptions& nvme) {
  if (nvme.store.slab_bytes < options_.max_block_bytes + kSlotHeaderBytes) {
    return absl::InvalidArgumentError(
        "nvme slab size must hold the largest block plus its 4 KiB slot header");
  }
  if (nvme.write_policy != "write_back" && nvme.write_policy != "write_through" &&
      nvme.write_policy != "write_through_after_hits") {
    return absl::InvalidArgumentError(
        absl::StrCat("nvme write policy '", nvme.write_policy,
                     "' is not one of write_back, write_through, write_through_after_hits"));
  }
  if (!(nvme.host_low_watermark < nvme.host_high_watermark && nvme.host_high_watermark <= 1) ||
      !(nvme.nvme_low_watermark < nvme.nvme_high_watermark && nvme.nvme_high_watermark <= 1)) {
    return absl::InvalidArgumentError("nvme watermarks must satisfy 0 <= low < high <= 1");
  }
  IoEngine* engine = nvme.engine_for_testing;
  if (engine == nullptr) {
    absl::StatusOr<std::unique_ptr<IoEngine>> created = CreateIoEngine(nvme.io, &io_engine_note_);
    if (!created.ok()) return created.status();
    io_engine_ = std::move(*created);
    engine = io_engine_.get();
  } else {
    io_engine_note_ = absl::StrCat(engine->name(), " (injected)");
  }
  if (nvme.register_arena && kArenaBufferBytes % options_.slab_bytes != 0) {
    spdlog::warn(
        "nvme tier: not registering the host arena: its slab size ({}) does not divide "
        "1 GiB, so a slot could straddle two fixed buffers",
        options_.slab_bytes);
  } else if (nvme.register_arena && engine->capabilities().registered_files) {
    // Fixed buffers of at most 1 GiB (the kernel's limit per buffer); slots
    // never straddle two, as slabs divide 1 GiB.
    std::vector<absl::Span<uint8_t>> chunks;
    for (uint64_t off = 0; off < arena_->size(); off += kArenaBufferBytes) {
      chunks.emplace_back(arena_->data() + off, std::min(kArenaBufferBytes, arena_->size() - off));
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
  absl::StatusOr<std::unique_ptr<Catalog>> catalog = Catalog::Open(catalog_dir);
  if (!catalog.ok()) return catalog.status();
  catalog_ = std::move(*catalog);
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
  nvme_ = std::move(*store);
  for (const std::string& dir : nvme.store.dirs) {
    WearOptions w = nvme.wear;
    if (w.capacity_bytes == 0) {
      struct statvfs st;
      if (statvfs(dir.c_str(), &st) == 0) {
        w.capacity_bytes = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
      }
    }
    wear_.push_back(std::make_unique<WearBudget>(w, clock_));
  }
  spdlog::info("nvme tier: {} device(s), io engine {}, catalog {}", nvme.store.dirs.size(),
               io_engine_note_, catalog_dir);
  return absl::OkStatus();
}

absl::Status BlockCache::RecoverFromCatalog() {
  std::vector<CatalogEntry> entries;
  uint64_t corrupt = 0;
  absl::Status scan = catalog_->ForEach(
      [&](const CatalogEntry& e) {
        entries.push_back(e);
        return absl::OkStatus();
      },
      &corrupt);
  if (!scan.ok()) return scan;
  // Index parents before children; an entry whose parent is neither indexed
  // nor in the catalog (or whose slot cannot be claimed) is dropped, and so,
  // transitively, are its descendants: nothing recovered is ever stranded.
  using Key = std::pair<NamespaceId, BlockKey>;
  absl::flat_hash_map<Key, size_t> by_key;
  for (size_t i = 0; i < entries.size(); ++i) by_key[{entries[i].ns, entries[i].key}] = i;
  enum State : uint8_t { kPending, kDone, kDropped };
  std::vector<State> state(entries.size(), kPending);
  uint64_t recovered = 0, dropped = corrupt;
  // A large catalog takes a while: the log shows a progress bar (in tenths).
  const bool show_progress = entries.size() >= 100'000;
  int shown_tenths = 0;
  if (show_progress) {
    spdlog::info("nvme tier: indexing {} catalog entries", entries.size());
  }
  MutexLock lock(&mu_);
  for (size_t start = 0; start < entries.size(); ++start) {
    if (const int tenths = static_cast<int>(start * 10 / entries.size());
        show_progress && tenths > shown_tenths) {
      shown_tenths = tenths;
      spdlog::info("nvme tier: recovering [{}{}] {}% ({}/{})", std::string(tenths, '#'),
                   std::string(10 - tenths, ' '), tenths * 10, start, entries.size());
    }
    // Walk up to the first ancestor that is settled, then settle downwards.
    std::vector<size_t> chain;
    size_t at = start;
    while (state[at] == kPending) {
      chain.push_back(at);
      const CatalogEntry& e = entries[at];
      if (e.parent.empty()) break;
      auto it = by_key.find(Key{e.ns, e.parent});
      if (it == by_key.end() || std::find(chain.begin(), chain.end(), it->second) != chain.end()) {
        break;
      }
      at = it->second;
    }
    for (auto i = chain.rbegin(); i != chain.rend(); ++i) {
      const CatalogEntry& e = entries[*i];
      bool ok = true;
      if (!e.parent.empty()) {
        auto it = by_key.find(Key{e.ns, e.parent});
        ok = it != by_key.end() && state[it->second] == kDone;
      }
      const NvmeSlot slot{e.device, {e.offset, e.size_class}};
      // A block larger than this run's limit could never be promoted.
      if (ok) ok = e.payload_bytes > 0 && e.payload_bytes <= options_.max_block_bytes;
      if (ok) ok = nvme_->Claim(slot, e.sequence).ok();
      if (ok) {
        auto rec = std::make_unique<BlockRecord>();
        rec->ns = e.ns;
        rec->key = e.key;
        rec->parent_key = e.parent;
        rec->size = e.payload_bytes;
        rec->checksum = e.checksum;
        rec->in_host = false;
        rec->on_nvme = true;
        rec->nvme = slot;
        rec->nvme_sequence = e.sequence;
        rec->uses = 1;
        ok = index_.Insert(std::move(rec)).ok();
        if (!ok) nvme_->Free(slot);
      }
      if (!ok) {
        state[*i] = kDropped;
        ++dropped;
        catalog_->Delete(e.ns, e.key).IgnoreError();
        continue;
      }
      state[*i] = kDone;
      ++recovered;
      NamespaceEntry& entry = namespaces_[e.ns];
      if (entry.block_bytes == 0) entry.opened = false;  // known from NVMe only, until opened
      entry.blocks += 1;
      entry.bytes += e.payload_bytes;
      stored_bytes_ += e.payload_bytes;
      nvme_stored_bytes_ += e.payload_bytes;
      nvme_blocks_ += 1;
    }
  }
  counters_.recovered_blocks = recovered;
  counters_.recovery_dropped = dropped;
  if (!entries.empty() || corrupt > 0) {
    spdlog::info("nvme tier: recovered {} blocks from the catalog, dropped {}", recovered, dropped);
  }
  return absl::OkStatus();
}

absl::StatusOr<OpenNamespaceResult> BlockCache::OpenNamespace(const NamespaceSpec& spec) {
  if (absl::Status s = ValidateNamespaceSpec(spec, options_.max_block_bytes); !s.ok()) return s;
  NamespaceSpec normalized = spec;
  if (normalized.layout.tp_size == 0) normalized.layout.tp_size = 1;
  const NamespaceId id = NamespaceId::Of(normalized);
  const uint64_t block_bytes = *BlockBytes(normalized.layout);
  MutexLock lock(&mu_);
  auto it = namespaces_.find(id);
  if (it != namespaces_.end() && it->second.opened)
    return OpenNamespaceResult{id, block_bytes, false};
  // Opening counts against the limit, also for a namespace whose blocks were
  // recovered from NVMe (those take no slot until opened).
  const size_t open = OpenNamespacesLocked();
  if (open >= options_.max_namespaces) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this daemon already has ", open, " namespaces open (max_namespaces)"));
  }
  if (absl::Status s = quotas_.ChargeNamespace(normalized.tenant); !s.ok()) return s;
  if (it != namespaces_.end()) {
    it->second.spec = std::move(normalized);
    it->second.block_bytes = block_bytes;
    it->second.opened = true;
    spdlog::info("re-opened namespace {} (model '{}', {} blocks recovered)", id.ToHex(),
                 spec.model_id, it->second.blocks);
    return OpenNamespaceResult{id, block_bytes, false};
  }
  namespaces_.emplace(id, NamespaceEntry{std::move(normalized), block_bytes, 0, 0, true});
  spdlog::info("opened namespace {} (model '{}', {} bytes per block)", id.ToHex(), spec.model_id,
               block_bytes);
  return OpenNamespaceResult{id, block_bytes, true};
}

TenantUsage BlockCache::UsageOf(absl::string_view tenant) {
  MutexLock lock(&mu_);
  return quotas_.Usage(tenant);
}

size_t BlockCache::OpenNamespacesLocked() const {
  return static_cast<size_t>(std::count_if(namespaces_.begin(), namespaces_.end(),
                                           [](const auto& e) { return e.second.opened; }));
}

absl::Status NamespaceNotOpenError(const NamespaceId& ns) {
  return absl::NotFoundError(
      absl::StrCat("namespace ", ns.ToHex(), " is not open; call OpenNamespace first"));
}

absl::StatusOr<BlockCache::NamespaceEntry*> BlockCache::FindNamespaceLocked(const NamespaceId& ns) {
  auto it = namespaces_.find(ns);
  if (it == namespaces_.end() || !it->second.opened) return NamespaceNotOpenError(ns);
  return &it->second;
}

absl::StatusOr<uint64_t> BlockCache::NamespaceBlockBytes(const NamespaceId& ns) {
  MutexLock lock(&mu_);
  absl::StatusOr<NamespaceEntry*> entry = FindNamespaceLocked(ns);
  if (!entry.ok()) return entry.status();
  return (*entry)->block_bytes;
}

absl::Status BlockCache::CheckTenant(const NamespaceId& ns, absl::string_view tenant) {
  MutexLock lock(&mu_);
  absl::StatusOr<NamespaceEntry*> entry = FindNamespaceLocked(ns);
  if (!entry.ok()) return entry.status();
  // Another tenant's namespace reads exactly as one that is not open: ids
  // are public hashes, so any other answer would tell a tenant which models
  // its neighbours serve.
  if ((*entry)->spec.tenant != tenant) return NamespaceNotOpenError(ns);
  return absl::OkStatus();
}

absl::Status BlockCache::CheckKeyCount(size_t n) const {
  if (n == 0 || n > options_.max_keys_per_request) {
    return absl::InvalidArgumentError(
        absl::StrCat("request has ", n, " keys; must be 1..", options_.max_keys_per_request));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Lookup and leases

absl::StatusOr<LookupResult> BlockCache::Lookup(const NamespaceId& ns,
                                                absl::Span<const BlockKey> keys, bool take_lease,
                                                absl::Duration lease_ttl) {
  if (absl::Status s = CheckKeyCount(keys.size()); !s.ok()) return s;
  if (lease_ttl < absl::ZeroDuration() || lease_ttl > options_.max_lease_ttl) {
    return absl::InvalidArgumentError(absl::StrCat("lease TTL ", absl::FormatDuration(lease_ttl),
                                                   " is above the maximum of ",
                                                   absl::FormatDuration(options_.max_lease_ttl)));
  }
  if (!take_lease && lease_ttl != absl::ZeroDuration()) {
    return absl::InvalidArgumentError("lease_ttl_ms is set but take_lease is false");
  }
  MutexLock lock(&mu_);
  ExpireLeasesLocked();
  if (absl::StatusOr<NamespaceEntry*> entry = FindNamespaceLocked(ns); !entry.ok()) {
    return entry.status();
  }
  std::vector<BlockRecord*> matched;
  matched.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    BlockRecord* rec = index_.Find(ns, keys[i]);
    if (rec == nullptr) break;
    // The chain holds when this block's cached parent is the previous match
    // (the index links each block to its parent's record).
    if (i > 0 && rec->parent != matched.back()) break;
    matched.push_back(rec);
  }
  auto ns_entry = namespaces_.find(ns);
  const std::string& tenant = ns_entry->second.spec.tenant;
  if (take_lease && !matched.empty()) {
    if (leases_.size() >= options_.max_leases) {
      return absl::ResourceExhaustedError(
          absl::StrCat(leases_.size(), " leases are held (max_leases); release some"));
    }
    if (absl::Status s = quotas_.ChargeLease(tenant, matched.size()); !s.ok()) return s;
  }
  LookupResult result;
  result.blocks.reserve(matched.size());
  for (BlockRecord* rec : matched) {
    index_.Touch(rec);
    ++rec->uses;
    result.blocks.push_back(MatchedBlock{rec->key, rec->size, rec->in_host, rec->on_nvme});
  }
  counters_.lookup_keys += keys.size();
  counters_.lookup_hits += matched.size();
  if (take_lease && !matched.empty()) {
    const absl::Duration ttl =
        lease_ttl == absl::ZeroDuration() ? options_.default_lease_ttl : lease_ttl;
    std::string id;
    do {
      id = absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(bitgen_),
                           absl::Uniform<uint64_t>(bitgen_));
    } while (leases_.contains(id));
    Lease lease{matched, clock_->Now() + ttl, tenant, ns};
    for (BlockRecord* rec : matched) index_.AddLease(rec);
    lease_expiry_.emplace(lease.expiry, id);
    result.lease_expiry = lease.expiry;
    result.lease_id = id;
    leases_.emplace(std::move(id), std::move(lease));
    ++counters_.leases_taken;
  }
  return result;
}

absl::StatusOr<uint32_t> BlockCache::Release(absl::string_view lease_id, absl::string_view tenant) {
  MutexLock lock(&mu_);
  ExpireLeasesLocked();
  auto it = leases_.find(lease_id);
  if (it == leases_.end() || it->second.tenant != tenant) {
    return absl::NotFoundError(
        absl::StrCat("lease '", lease_id.substr(0, 64), "' is unknown or expired"));
  }
  const uint32_t n = static_cast<uint32_t>(it->second.blocks.size());
  DropLeaseLocked(it->first);
  return n;
}

void BlockCache::ExpireLeasesLocked() {
  const absl::Time now = clock_->Now();
  while (!lease_expiry_.empty() && lease_expiry_.begin()->first <= now) {
    const std::string id = lease_expiry_.begin()->second;
    DropLeaseLocked(id);
    ++counters_.leases_expired;
  }
}

void BlockCache::DropLeaseLocked(std::string id) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  Lease lease = std::move(it->second);
  leases_.erase(it);
  quotas_.RefundLease(lease.tenant, lease.blocks.size());
  for (auto [e, end] = lease_expiry_.equal_range(lease.expiry); e != end; ++e) {
    if (e->second == id) {
      lease_expiry_.erase(e);
      break;
    }
  }
  for (BlockRecord* rec : lease.blocks) {
    index_.DropLease(rec);
    ReleaseIfDeadLocked(rec);
  }
}

// ---------------------------------------------------------------------------
// Slots, removal and pins

absl::StatusOr<SlabAllocator::Slot> BlockCache::AllocateLocked(uint64_t size) {
  ExpireLeasesLocked();
  absl::StatusOr<uint32_t> cls = allocator_->ClassFor(size);
  if (!cls.ok()) return cls.status();
  if (std::optional<SlabAllocator::Slot> slot = allocator_->Allocate(*cls)) return *slot;
  // Eviction is bounded: one block of the same class (its slot is reused at
  // once), preferring a host copy of a block that is also on NVMe (nothing is
  // lost), or every block of one slab whose blocks are all reclaimable (the
  // slab returns to the pool). Nothing is evicted unless it makes room.
  if (BlockRecord* copy = index_.Coldest(PrefixIndex::kHostCopy, *cls); copy != nullptr) {
    DropHostCopyLocked(copy);
    return *allocator_->Allocate(*cls);
  }
  if (BlockRecord* victim = index_.ColdestEvictable(*cls); victim != nullptr) {
    RemoveLocked(victim);
    ++counters_.evictions;
    return *allocator_->Allocate(*cls);
  }
  if (std::optional<uint32_t> slab = ReclaimableSlabLocked(); slab.has_value()) {
    std::vector<BlockRecord*> copies, victims;
    index_.ForEachCandidate(PrefixIndex::kHostCopy,
                            [&](BlockRecord* rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                              if (allocator_->SlabOf(rec->slot.offset) == *slab)
                                copies.push_back(rec);
                            });
    index_.ForEachEvictable([&](BlockRecord* rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (allocator_->SlabOf(rec->slot.offset) == *slab) victims.push_back(rec);
    });
    for (BlockRecord* rec : copies) DropHostCopyLocked(rec);
    for (BlockRecord* rec : victims) {
      RemoveLocked(rec);
      ++counters_.evictions;
    }
    return *allocator_->Allocate(*cls);
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "host tier is full: no room for a ", size, "-byte block; ", allocator_->used_bytes(), " of ",
      allocator_->capacity(),
      " bytes are held by pinned blocks, blocks with cached children, or other size classes"));
}

std::optional<uint32_t> BlockCache::ReclaimableSlabLocked() {
  // A slab qualifies when every allocated slot in it holds a reclaimable
  // block (a host-only leaf, or a host copy of an NVMe block). Among those,
  // take the one whose most recently used block is coldest.
  absl::flat_hash_map<uint32_t, std::pair<uint32_t, uint64_t>> per_slab;  // count, newest
  auto count = [&](BlockRecord* rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto& [n, newest] = per_slab[allocator_->SlabOf(rec->slot.offset)];
    ++n;
    newest = std::max(newest, rec->last_access);
  };
  index_.ForEachEvictable(count);
  index_.ForEachCandidate(PrefixIndex::kHostCopy, count);
  std::optional<uint32_t> best;
  uint64_t best_newest = 0;
  for (const auto& [slab, stats] : per_slab) {
    if (stats.first != allocator_->SlotsInUse(slab)) continue;
    if (!best.has_value() || stats.second < best_newest) {
      best = slab;
      best_newest = stats.second;
    }
  }
  return best;
}

void BlockCache::DropHostCopyLocked(BlockRecord* record) {
  allocator_->Free(record->slot);
  record->in_host = false;
  host_stored_bytes_ -= record->size;
  host_blocks_ -= 1;
  ++counters_.host_copies_dropped;
  index_.Reclassify(record);
}

void BlockCache::RemoveLocked(BlockRecord* record) {
  NamespaceEntry& entry = namespaces_.at(record->ns);
  entry.blocks -= 1;
  entry.bytes -= record->size;
  // A namespace known only from recovered blocks goes away with its last one.
  if (!entry.opened && entry.blocks == 0) namespaces_.erase(record->ns);
  stored_bytes_ -= record->size;
  if (record->in_host) {
    host_stored_bytes_ -= record->size;
    host_blocks_ -= 1;
  }
  if (record->on_nvme) {
    nvme_stored_bytes_ -= record->size;
    nvme_blocks_ -= 1;
    // Unsynced: an entry that survives a crash is verified against its slot.
    catalog_->Delete(record->ns, record->key).IgnoreError();
  }
  std::unique_ptr<BlockRecord> owned = index_.Remove(record);
  if (owned->pinned()) {
    removed_pinned_.emplace(owned.get(), std::move(owned));
  } else {
    FreeStorageLocked(owned.get());
  }
}

void BlockCache::FreeStorageLocked(BlockRecord* record) {
  if (record->in_host) allocator_->Free(record->slot);
  if (record->on_nvme) nvme_->Free(record->nvme);
}

void BlockCache::ReleaseIfDeadLocked(BlockRecord* record) {
  if (record->indexed || record->pinned()) return;
  auto it = removed_pinned_.find(record);
  if (it == removed_pinned_.end()) return;
  FreeStorageLocked(record);
  removed_pinned_.erase(it);
}

void BlockCache::DropSubtreeLocked(BlockRecord* root) {
  std::vector<BlockRecord*> order = index_.SubtreePostOrder(root);
  counters_.dropped_descendants += order.size() - 1;
  for (BlockRecord* rec : order) RemoveLocked(rec);
}

void BlockCache::UnpinLocked(BlockRecord* record) {
  index_.DropRef(record);
  ReleaseIfDeadLocked(record);
}

void BlockCache::Unpin(BlockRecord* record) {
  MutexLock lock(&mu_);
  UnpinLocked(record);
}

// ---------------------------------------------------------------------------
// Read

BlockCache::ReadHandle::ReadHandle(ReadHandle&& other) noexcept
    : cache_(std::exchange(other.cache_, nullptr)),
      record_(std::exchange(other.record_, nullptr)) {}

BlockCache::ReadHandle& BlockCache::ReadHandle::operator=(ReadHandle&& other) noexcept {
  if (this != &other) {
    if (cache_ != nullptr) cache_->Unpin(record_);
    cache_ = std::exchange(other.cache_, nullptr);
    record_ = std::exchange(other.record_, nullptr);
  }
  return *this;
}

BlockCache::ReadHandle::~ReadHandle() {
  if (cache_ != nullptr) cache_->Unpin(record_);
}

absl::Span<const uint8_t> BlockCache::ReadHandle::bytes() const {
  return {cache_->SlotData(record_->slot), record_->size};
}

void BlockCache::ReleaseHandlesLocked(std::vector<ReadHandle>& handles) {
  // Unpin under the caller's lock: the handles must not re-lock on destruction.
  for (ReadHandle& h : handles) {
    UnpinLocked(h.record_);
    h.cache_ = nullptr;
  }
}

absl::StatusOr<std::vector<BlockCache::ReadHandle>> BlockCache::Read(
    const NamespaceId& ns, absl::Span<const BlockKey> keys, bool verify) {
  if (absl::Status s = CheckKeyCount(keys.size()); !s.ok()) return s;
  std::vector<ReadHandle> handles;
  handles.reserve(keys.size());
  // Blocks held only on NVMe are promoted: a host slot is reserved under the
  // lock, filled and verified outside it, and published under it again.
  std::vector<NvmeRead> reads;
  std::vector<std::pair<BlockRecord*, SlabAllocator::Slot>> promoting;
  absl::flat_hash_set<BlockRecord*> promoting_set;
  {
    MutexLock lock(&mu_);
    ExpireLeasesLocked();
    if (absl::StatusOr<NamespaceEntry*> entry = FindNamespaceLocked(ns); !entry.ok()) {
      return entry.status();
    }
    for (const BlockKey& key : keys) {
      if (index_.Find(ns, key) == nullptr) {
        return absl::NotFoundError(absl::StrCat("block ", key.ToHex(), " is not cached"));
      }
    }
    for (const BlockKey& key : keys) {
      BlockRecord* rec = index_.Find(ns, key);
      index_.AddRef(rec);
      index_.Touch(rec);
      ++rec->uses;
      handles.push_back(ReadHandle(this, rec));
    }
    for (const ReadHandle& h : handles) {
      BlockRecord* rec = h.record_;
      if (rec->in_host || !promoting_set.insert(rec).second) continue;  // or a repeated key
      absl::StatusOr<SlabAllocator::Slot> slot = AllocateLocked(rec->size);
      if (!slot.ok()) {
        for (auto& [r, s] : promoting) allocator_->Free(s);
        ReleaseHandlesLocked(handles);
        return slot.status();
      }
      promoting.emplace_back(rec, *slot);
      SlotHeader expect{rec->ns,   rec->key,      rec->parent_key,
                        rec->size, rec->checksum, rec->nvme_sequence};
      reads.push_back({rec->nvme, expect, SlotData(*slot), ArenaBuffer(*slot)});
    }
  }
  if (!promoting.empty()) {
    const absl::Time read_start = absl::Now();
    std::vector<absl::Status> results = nvme_->Read(reads);
    const absl::Duration read_time = absl::Now() - read_start;
    uint64_t read_bytes = 0;
    bool all_read = true;
    for (size_t i = 0; i < promoting.size(); ++i) {
      read_bytes += promoting[i].first->size;
      all_read = all_read && results[i].ok();
    }
    if (all_read) nvme_meter_.Record(read_bytes, read_time);
    MutexLock lock(&mu_);
    std::vector<BlockRecord*> failed;
    for (size_t i = 0; i < promoting.size(); ++i) {
      auto& [rec, slot] = promoting[i];
      if (rec->in_host) {
        // A concurrent reader promoted it first: its copy serves us too.
        allocator_->Free(slot);
        continue;
      }
      if (!results[i].ok()) {
        allocator_->Free(slot);
        ++counters_.nvme_read_failures;
        nvme_degraded_ = results[i].code() != absl::StatusCode::kDataLoss;
        nvme_last_error_ = std::string(results[i].message());
        spdlog::error("nvme read of block {} failed: {}", rec->key.ToHex(),
                      std::string(results[i].message()));
        failed.push_back(rec);
        continue;
      }
      // The bytes were read and verified. A block removed meanwhile (we pin
      // it) keeps this copy until its last unpin frees it with the rest of its
      // storage, so our handle stays valid; only an indexed block is counted.
      rec->slot = slot;
      rec->in_host = true;
      ++counters_.nvme_hits;
      if (rec->indexed) {
        host_stored_bytes_ += rec->size;
        host_blocks_ += 1;
        ++counters_.promotions;
        counters_.bytes_nvme_to_host += rec->size;
        index_.Reclassify(rec);
      }
    }
    if (!failed.empty()) {
      const std::string message =
          absl::StrCat("block ", failed.front()->key.ToHex(), " could not be read from nvme (",
                       nvme_last_error_, ") and was dropped");
      for (BlockRecord* rec : failed) {
        if (rec->indexed) DropSubtreeLocked(rec);
      }
      ReleaseHandlesLocked(handles);
      return absl::NotFoundError(message);
    }
  }
  // Every handle's block is now in host memory: pinned blocks never lose
  // their host copy, and every block that lacked one was promoted above
  // (by this call or, first, by a concurrent one).
  {
    MutexLock lock(&mu_);
    counters_.host_hits += handles.size() - promoting.size();
  }
  // Verify outside the lock: pinned slots are never rewritten.
  std::vector<BlockRecord*> corrupt;
  if (verify) {
    const absl::Time verify_start = absl::Now();
    uint64_t verified_bytes = 0;
    for (const ReadHandle& h : handles) {
      verified_bytes += h.record_->size;
      if (Checksum64(h.bytes()) != h.record_->checksum) corrupt.push_back(h.record_);
    }
    host_meter_.Record(verified_bytes, absl::Now() - verify_start);
  }
  MutexLock lock(&mu_);
  if (!corrupt.empty()) {
    // Build the message first: unpinning below may free the records.
    const std::string message = absl::StrCat("block ", corrupt.front()->key.ToHex(),
                                             " failed its checksum and was dropped");
    for (BlockRecord* rec : corrupt) {
      if (!rec->indexed) continue;  // already dropped (a repeated key, or a concurrent reader)
      ++counters_.checksum_mismatches;
      spdlog::error(
          "block {} of namespace {} failed its checksum; dropping it and its cached descendants",
          rec->key.ToHex(), rec->ns.ToHex());
      DropSubtreeLocked(rec);
    }
    ReleaseHandlesLocked(handles);
    return absl::NotFoundError(message);
  }
  for (const ReadHandle& h : handles) {
    ++counters_.blocks_get;
    counters_.bytes_get += h.record_->size;
  }
  return handles;
}

absl::StatusOr<std::pair<std::vector<BlockView>, uint64_t>> BlockCache::TopBlocks(
    const NamespaceId& ns, size_t top) {
  MutexLock lock(&mu_);
  if (absl::StatusOr<NamespaceEntry*> entry = FindNamespaceLocked(ns); !entry.ok()) {
    return entry.status();
  }
  std::vector<const BlockRecord*> all;
  index_.ForEach([&](const BlockRecord& r) {
    if (r.ns == ns) all.push_back(&r);
  });
  const size_t n = std::min(top, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<ptrdiff_t>(n), all.end(),
                    [](const BlockRecord* a, const BlockRecord* b) {
                      return a->uses != b->uses ? a->uses > b->uses
                                                : a->last_access > b->last_access;
                    });
  std::vector<BlockView> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const BlockRecord& r = *all[i];
    out.push_back(BlockView{r.key, r.parent_key, r.size, r.in_host, r.on_nvme, r.uses, r.leases,
                            static_cast<uint32_t>(r.children.size())});
  }
  return std::make_pair(std::move(out), static_cast<uint64_t>(all.size()));
}

// ---------------------------------------------------------------------------
// Put

absl::StatusOr<std::unique_ptr<BlockCache::PutBatch>> BlockCache::BeginPut(const NamespaceId& ns) {
  MutexLock lock(&mu_);
  absl::StatusOr<NamespaceEntry*> entry = FindNamespaceLocked(ns);
  if (!entry.ok()) return entry.status();
  return std::unique_ptr<PutBatch>(
      new PutBatch(this, ns, (*entry)->block_bytes, (*entry)->spec.tenant));
}

BlockCache::PutBatch::~PutBatch() {
  if (done_ && held_.empty()) return;
  MutexLock lock(&cache_->mu_);
  if (!done_) ReleaseLocked();
  for (const SlabAllocator::Slot& slot : held_) cache_->allocator_->Free(slot);
}

void BlockCache::PutBatch::ReleaseLocked() {
  for (Staged& s : staged_) {
    if (s.slot.has_value()) cache_->allocator_->Free(*s.slot);
  }
  staged_.clear();
  for (BlockRecord* rec : pinned_) cache_->UnpinLocked(rec);
  pinned_.clear();
  cache_->quotas_.RefundReservation(tenant_, reserved_bytes_);
  reserved_bytes_ = 0;
  done_ = true;
}

absl::Status BlockCache::PutBatch::Fail(absl::Status status) {
  dead_ = true;
  return status;
}

absl::Status BlockCache::PutBatch::StartBlock(const BlockKey& key, const BlockKey& parent,
                                              uint64_t size) {
  absl::Status st = Reserve(key, parent, size);
  if (!st.ok()) dead_ = true;
  return st;
}

absl::Status BlockCache::PutBatch::Reserve(const BlockKey& key, const BlockKey& parent,
                                           uint64_t size) {
  if (dead_ || done_) return absl::FailedPreconditionError("put batch already ended");
  if (!staged_.empty() && staged_.back().filled != staged_.back().size) {
    const Staged& prev = staged_.back();
    return absl::InvalidArgumentError(absl::StrCat("block ", prev.key.ToHex(), " ended after ",
                                                   prev.filled, " of its ", prev.size, " bytes"));
  }
  if (size == 0 || size > block_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("block ", key.ToHex(), " declares ", size,
                                                   " bytes; blocks in this "
                                                   "namespace are 1..",
                                                   block_bytes_, " bytes"));
  }
  if (key == parent) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", key.ToHex(), " names itself as its parent"));
  }
  if (staged_index_.contains(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", key.ToHex(), " appears twice in one Put"));
  }
  MutexLock lock(&cache_->mu_);
  PrefixIndex& index = cache_->index_;
  auto pin = [&](BlockRecord* rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(cache_->mu_) {
    if (std::find(pinned_.begin(), pinned_.end(), rec) != pinned_.end()) return;
    index.AddRef(rec);
    pinned_.push_back(rec);
  };
  if (!parent.empty() && !staged_index_.contains(parent)) {
    BlockRecord* p = index.Find(ns_, parent);
    if (p == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("parent ", parent.ToHex(), " of block ", key.ToHex(),
                       " is not cached and not earlier in this Put"));
    }
    pin(p);
  }
  Staged staged{key, parent, size, 0, std::nullopt, 0};
  if (BlockRecord* existing = index.Find(ns_, key); existing != nullptr) {
    if (existing->parent_key != parent) {
      return absl::AlreadyExistsError(
          absl::StrCat("block ", key.ToHex(), " is cached with parent '",
                       existing->parent_key.ToHex(), "', not '", parent.ToHex(), "'"));
    }
    if (existing->size != size) {
      return absl::AlreadyExistsError(absl::StrCat("block ", key.ToHex(), " is cached with ",
                                                   existing->size, " bytes, not ", size));
    }
    pin(existing);
  } else {
    // The tenant's share first: a tenant whose open writes hold its share
    // of the tier is refused before it can evict anyone's blocks.
    if (absl::Status q = cache_->quotas_.ChargeReservation(tenant_, size); !q.ok()) return q;
    absl::StatusOr<SlabAllocator::Slot> slot = cache_->AllocateLocked(size);
    if (!slot.ok()) {
      cache_->quotas_.RefundReservation(tenant_, size);
      return slot.status();
    }
    reserved_bytes_ += size;
    staged.slot = *slot;
  }
  staged_index_.emplace(key, staged_.size());
  staged_.push_back(staged);
  hasher_.Reset();
  return absl::OkStatus();
}

void BlockCache::ReportChecksumMismatch(const ReadHandle& handle) {
  MutexLock lock(&mu_);
  BlockRecord* rec = handle.record_;
  if (!rec->indexed) return;  // already dropped
  ++counters_.checksum_mismatches;
  spdlog::error(
      "block {} of namespace {} failed its checksum; dropping it and its cached descendants",
      rec->key.ToHex(), rec->ns.ToHex());
  DropSubtreeLocked(rec);  // the handle's pin keeps the record alive until it goes
}

absl::Status BlockCache::PutBatch::Append(absl::Span<const uint8_t> data,
                                          absl::Span<const uint8_t> may_vanish) {
  if (dead_ || done_) return absl::FailedPreconditionError("put batch already ended");
  if (staged_.empty()) {
    return Fail(absl::InvalidArgumentError("data arrived before any block was named"));
  }
  Staged& s = staged_.back();
  if (data.size() > s.size - s.filled) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("chunk of ", data.size(), " bytes overruns block ", s.key.ToHex(), " (",
                     s.filled, " of ", s.size, " bytes already received)")));
  }
  if (s.slot.has_value()) {
    // The slot belongs to this batch alone until Commit: no lock needed. Copy
    // and hash in cache-sized pieces, hashing the copy: one pass over memory,
    // and the checksum describes the bytes stored even if the source changes.
    uint8_t* dst = cache_->SlotData(*s.slot) + s.filled;
    for (size_t done = 0; done < data.size(); done += kCopyChunk) {
      const size_t n = std::min(kCopyChunk, data.size() - done);
      if (may_vanish.empty()) {
        std::memcpy(dst + done, data.data() + done, n);
        hasher_.Update(absl::Span<const uint8_t>(dst + done, n));
      } else if (!GuardedCopyAndHash(dst + done, data.data() + done, n, hasher_, may_vanish.data(),
                                     may_vanish.size())) {
        hasher_.Reset();
        return Fail(VanishedMemoryError(absl::StrCat("block ", s.key.ToHex())));
      }
    }
  }
  s.filled += data.size();
  if (s.filled == s.size && s.slot.has_value()) s.checksum = hasher_.Digest();
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<uint8_t>> BlockCache::PutBatch::StartLanding(const BlockKey& key,
                                                                       const BlockKey& parent,
                                                                       uint64_t size,
                                                                       uint64_t checksum) {
  if (dead_ || done_) return absl::FailedPreconditionError("put batch already ended");
  // A refused landing leaves the batch usable: the blocks before it can
  // still be received and committed.
  if (absl::Status st = Reserve(key, parent, size); !st.ok()) return st;
  Staged& s = staged_.back();
  s.filled = s.size;
  s.landing = true;
  if (!s.slot.has_value()) return absl::Span<uint8_t>();
  s.checksum = checksum;
  return absl::Span<uint8_t>(cache_->SlotData(*s.slot), s.size);
}

size_t BlockCache::PutBatch::KeepVerifiedPrefix(size_t received) {
  if (dead_ || done_) return 0;
  size_t keep = std::min(received, staged_.size());
  for (size_t i = 0; i < keep; ++i) {
    Staged& s = staged_[i];
    if (!s.landing || !s.slot.has_value()) continue;
    // The slot belongs to this batch alone until Commit: no lock needed.
    const uint64_t got = Checksum64({cache_->SlotData(*s.slot), s.size});
    if (got != s.checksum) {
      spdlog::warn(
          "received block {} does not match its checksum; it and the {} after it are "
          "not stored",
          s.key.ToHex(), staged_.size() - i - 1);
      keep = i;
      break;
    }
    s.verified = true;
  }
  for (size_t i = keep; i < staged_.size(); ++i) {
    if (staged_[i].slot.has_value()) held_.push_back(*staged_[i].slot);
    staged_index_.erase(staged_[i].key);
  }
  staged_.resize(keep);
  return keep;
}

absl::StatusOr<PutResult> BlockCache::PutBatch::Commit() {
  if (dead_ || done_) return absl::FailedPreconditionError("put batch already ended");
  if (staged_.empty()) return Fail(absl::InvalidArgumentError("Put carried no blocks"));
  if (staged_.back().filled != staged_.back().size) {
    const Staged& last = staged_.back();
    return Fail(
        absl::InvalidArgumentError(absl::StrCat("stream ended after ", last.filled, " of the ",
                                                last.size, " bytes of block ", last.key.ToHex())));
  }
  for (const Staged& s : staged_) {
    if (s.landing && s.slot.has_value() && !s.verified) {
      return Fail(absl::FailedPreconditionError(
          absl::StrCat("block ", s.key.ToHex(), " landed but was not verified")));
    }
  }
  MutexLock lock(&cache_->mu_);
  PrefixIndex& index = cache_->index_;
  if (!cache_->FindNamespaceLocked(ns_).ok()) {
    return Fail(
        absl::AbortedError(absl::StrCat("namespace ", ns_.ToHex(), " was closed during the Put")));
  }
  // Validate everything first: the batch lands whole or not at all.
  std::vector<bool> skip(staged_.size(), false);
  for (size_t i = 0; i < staged_.size(); ++i) {
    const Staged& s = staged_[i];
    BlockRecord* now = index.Find(ns_, s.key);
    if (!s.slot.has_value() && now == nullptr) {
      return Fail(absl::AbortedError(
          absl::StrCat("cached block ", s.key.ToHex(), " was dropped during the Put; retry")));
    }
    if (s.slot.has_value() && now != nullptr) {
      if (now->parent_key != s.parent) {
        return Fail(absl::AbortedError(
            absl::StrCat("block ", s.key.ToHex(), " was stored concurrently with another parent")));
      }
      skip[i] = true;  // a concurrent Put stored the same block first
    }
    if (!s.parent.empty() && !staged_index_.contains(s.parent) &&
        index.Find(ns_, s.parent) == nullptr) {
      return Fail(absl::AbortedError(
          absl::StrCat("parent ", s.parent.ToHex(), " was dropped during the Put; retry")));
    }
  }
  PutResult result;
  NamespaceEntry& entry = cache_->namespaces_.at(ns_);
  for (size_t i = 0; i < staged_.size(); ++i) {
    Staged& s = staged_[i];
    if (!s.slot.has_value() || skip[i]) {
      ++result.blocks_already_cached;
      continue;
    }
    auto rec = std::make_unique<BlockRecord>();
    rec->ns = ns_;
    rec->key = s.key;
    rec->parent_key = s.parent;
    rec->size = s.size;
    rec->checksum = s.checksum;
    rec->slot = *s.slot;
    rec->uses = 1;
    if (absl::Status st = index.Insert(std::move(rec)); !st.ok()) {
      // Unreachable after validation; a failure here is a bug, not bad input.
      spdlog::critical("Put commit: {}", st.ToString());
      std::abort();
    }
    s.slot.reset();  // now owned by the index
    ++result.blocks_stored;
    result.bytes_stored += s.size;
    entry.blocks += 1;
    entry.bytes += s.size;
  }
  cache_->stored_bytes_ += result.bytes_stored;
  cache_->host_stored_bytes_ += result.bytes_stored;
  cache_->host_blocks_ += result.blocks_stored;
  cache_->counters_.blocks_put += result.blocks_stored;
  cache_->counters_.bytes_put += result.bytes_stored;
  ReleaseLocked();
  return result;
}

// ---------------------------------------------------------------------------
// NVMe movement

bool BlockCache::WantsNvmeWrite(const BlockRecord& record, bool host_pressure) const {
  const NvmeTierOptions& o = *options_.nvme;
  if (o.write_policy == "write_through") return true;
  if (o.write_policy == "write_through_after_hits") return record.uses >= o.write_through_hits;
  return host_pressure && record.uses >= o.admit_min_uses;
}

size_t BlockCache::RunMoverOnce() {
  if (nvme_ == nullptr) return 0;
  MutexLock pass(&mover_mu_);
  const NvmeTierOptions& o = *options_.nvme;
  std::vector<BlockRecord*> batch;
  std::vector<NvmeWrite> writes;
  {
    MutexLock lock(&mu_);
    ExpireLeasesLocked();
    const double capacity = static_cast<double>(allocator_->capacity());
    const double used = static_cast<double>(allocator_->used_bytes());
    const bool pressure = used > o.host_high_watermark * capacity;
    if (o.write_policy != "write_back" || pressure) {
      // Bytes to move before host occupancy is back under the low watermark.
      const double need = pressure ? used - o.host_low_watermark * capacity : 1e300;
      double scheduled = 0;
      // At most a batch of leaves (each brings at least one block), coldest
      // first, among those the policy admits.
      const std::vector<BlockRecord*> leaves =
          index_.ColdestCandidates(PrefixIndex::kHostOnlyLeaf, o.mover_batch,
                                   [&](const BlockRecord& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                                     if (auto ns = namespaces_.find(r.ns);
                                         ns != namespaces_.end() && !ns->second.nvme_admit) {
                                       ++counters_.admissions_refused_value;
                                       return false;
                                     }
                                     if (WantsNvmeWrite(r, pressure)) return true;
                                     if (pressure) ++counters_.admissions_refused_filter;
                                     return false;
                                   });
      absl::flat_hash_set<BlockRecord*> chosen;
      bool full = false;
      for (BlockRecord* leaf : leaves) {
        if (batch.size() >= o.mover_batch || scheduled >= need || full) break;
        // The leaf and its ancestors not yet on NVMe, written parents first:
        // the persisted set stays prefix-closed, so a crash strands nothing.
        std::vector<BlockRecord*> chain;
        for (BlockRecord* r = leaf; r != nullptr && !r->on_nvme && !chosen.contains(r);
             r = r->parent) {
          chain.push_back(r);
        }
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
          BlockRecord* r = *it;
          absl::StatusOr<NvmeSlot> slot = nvme_->Allocate(r->size);
          // Make room by dropping cold blocks held only on NVMe, a bounded
          // number (they may belong to other size classes and free nothing).
          for (int tries = 0; !slot.ok() && tries < 16 &&
                              slot.status().code() == absl::StatusCode::kResourceExhausted;
               ++tries) {
            BlockRecord* victim = index_.Coldest(PrefixIndex::kNvmeOnlyLeaf, std::nullopt);
            if (victim == nullptr) break;
            RemoveLocked(victim);
            ++counters_.nvme_evictions;
            slot = nvme_->Allocate(r->size);
          }
          if (!slot.ok()) {
            ++counters_.admissions_refused_full;
            full = true;
            break;
          }
          if (!wear_[slot->device]->TryConsume(kSlotHeaderBytes + RoundUpToIo(r->size))) {
            // Over the SSD write budget: stop admitting; requests still succeed.
            nvme_->Free(*slot);
            ++counters_.admissions_refused_budget;
            full = true;
            break;
          }
          chosen.insert(r);
          index_.AddRef(r);
          batch.push_back(r);
          SlotHeader h{r->ns, r->key, r->parent_key, r->size, r->checksum, nvme_->NextSequence()};
          writes.push_back({*slot, h, SlotData(r->slot), ArenaBuffer(r->slot)});
          scheduled += static_cast<double>(allocator_->ClassBytes(r->slot.size_class));
        }
      }
    }
  }
  size_t written = 0;
  if (!batch.empty()) {
    // Data first, made durable by Write; only then the catalog commit.
    std::vector<absl::Status> results = nvme_->Write(writes);
    // A block whose parent is in this batch and failed is failed too: the
    // catalog must never hold a child without its parent. Parents precede
    // their children in the batch.
    absl::flat_hash_map<const BlockRecord*, size_t> position;
    for (size_t i = 0; i < batch.size(); ++i) position[batch[i]] = i;
    for (size_t i = 0; i < batch.size(); ++i) {
      auto p = position.find(batch[i]->parent);
      if (results[i].ok() && p != position.end() && !results[p->second].ok()) {
        results[i] = absl::AbortedError("its parent's nvme write failed");
      }
    }
    std::vector<CatalogEntry> entries;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!results[i].ok()) continue;
      const NvmeWrite& w = writes[i];
      entries.push_back({w.header.ns, w.header.key, w.header.parent, w.slot.device,
                         w.slot.slot.offset, w.slot.slot.size_class, w.header.payload_bytes,
                         w.header.payload_checksum, w.header.sequence});
    }
    const absl::Status committed = entries.empty() ? absl::OkStatus() : catalog_->PutBatch(entries);
    MutexLock lock(&mu_);
    bool all_ok = committed.ok();
    for (size_t i = 0; i < batch.size(); ++i) {
      BlockRecord* r = batch[i];
      const bool ok = results[i].ok() && committed.ok();
      if (!ok) {
        all_ok = false;
        wear_[writes[i].slot.device]->Refund(kSlotHeaderBytes + RoundUpToIo(r->size));
        nvme_->Free(writes[i].slot);
        ++counters_.nvme_write_failures;
        nvme_degraded_ = true;
        nvme_last_error_ =
            std::string(results[i].ok() ? committed.message() : results[i].message());
      } else {
        // Also for a block removed meanwhile: its NVMe slot is then freed
        // (and its catalog entry removed) with the rest of its storage.
        wear_[writes[i].slot.device]->RecordWrite(kSlotHeaderBytes + RoundUpToIo(r->size));
        r->on_nvme = true;
        r->nvme = writes[i].slot;
        r->nvme_sequence = writes[i].header.sequence;
        if (r->indexed) {
          nvme_stored_bytes_ += r->size;
          nvme_blocks_ += 1;
          ++counters_.demotions;
          counters_.bytes_host_to_nvme += r->size;
          ++written;
        } else {
          catalog_->Delete(r->ns, r->key).IgnoreError();
        }
      }
      UnpinLocked(r);  // reclassifies the block
    }
    if (all_ok) nvme_degraded_ = false;
    if (!all_ok) spdlog::warn("nvme tier degraded: {}", nvme_last_error_);
  }
  MutexLock lock(&mu_);
  BalanceLocked();
  return written;
}

size_t BlockCache::DrainWrites(absl::Time deadline, bool* left) {
  // At least one pass (a batch of blocks: milliseconds), even when the
  // deadline has passed, so that what is left is known, not guessed.
  size_t written = 0;
  bool drained = nvme_ == nullptr;
  while (!drained) {
    const size_t n = RunMoverOnce();
    drained = n == 0;  // nothing more the policy wants written
    written += n;
    if (absl::Now() >= deadline) break;
  }
  if (left != nullptr) *left = !drained;
  return written;
}

void BlockCache::BalanceLocked() {
  const NvmeTierOptions& o = *options_.nvme;
  const double host_capacity = static_cast<double>(allocator_->capacity());
  if (allocator_->used_bytes() > o.host_high_watermark * host_capacity) {
    while (allocator_->used_bytes() > o.host_low_watermark * host_capacity) {
      BlockRecord* copy = index_.Coldest(PrefixIndex::kHostCopy, std::nullopt);
      if (copy == nullptr) break;
      DropHostCopyLocked(copy);
    }
  }
  const double nvme_capacity = static_cast<double>(nvme_->capacity_bytes());
  if (static_cast<double>(nvme_->used_bytes()) > o.nvme_high_watermark * nvme_capacity) {
    while (static_cast<double>(nvme_->used_bytes()) > o.nvme_low_watermark * nvme_capacity) {
      BlockRecord* victim = index_.Coldest(PrefixIndex::kNvmeOnlyLeaf, std::nullopt);
      if (victim == nullptr) break;
      RemoveLocked(victim);
      ++counters_.nvme_evictions;
    }
  }
}

std::vector<DeviceWear> BlockCache::Wear() {
  std::vector<DeviceWear> out;
  if (nvme_ == nullptr) return out;
  for (size_t i = 0; i < wear_.size(); ++i) {
    const std::string& dir = options_.nvme->store.dirs[i];
    out.push_back({dir, wear_[i]->options(), wear_[i]->Report(), ReadSmartHealth(dir)});
  }
  return out;
}

void BlockCache::MoverLoop() {
  const absl::Duration interval = options_.nvme->mover_interval;
  while (true) {
    {
      MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(Condition(&stop_mover_), interval)) return;
    }
    RunMoverOnce();
  }
}

// ---------------------------------------------------------------------------
// Introspection

CacheSnapshot BlockCache::Snapshot(bool scan_for_stranded) {
  MutexLock lock(&mu_);
  ExpireLeasesLocked();
  CacheSnapshot snap;
  snap.namespaces = static_cast<uint32_t>(OpenNamespacesLocked());
  snap.blocks = index_.size();
  snap.bytes = stored_bytes_;
  snap.active_leases = static_cast<uint32_t>(leases_.size());
  if (scan_for_stranded) snap.stranded_blocks = index_.CountStranded(&snap.stranded_bytes);
  snap.counters = counters_;
  snap.host.capacity_bytes = allocator_->capacity();
  snap.host.used_bytes = allocator_->used_bytes();
  snap.host.stored_bytes = host_stored_bytes_;
  snap.host.blocks = host_blocks_;
  snap.host.evictions = counters_.evictions + counters_.host_copies_dropped;
  snap.host.evictable_blocks = index_.candidate_count(PrefixIndex::kHostOnlyLeaf) +
                               index_.candidate_count(PrefixIndex::kHostCopy);
  if (nvme_ != nullptr) {
    NvmeSnapshot& n = snap.nvme;
    n.enabled = true;
    n.io_engine = io_engine_note_;
    n.write_policy = options_.nvme->write_policy;
    n.degraded = nvme_degraded_;
    n.last_error = nvme_last_error_;
    n.devices = nvme_->Stats();
    for (const NvmeDeviceStats& d : n.devices) {
      n.tier.capacity_bytes += d.capacity_bytes;
      n.tier.used_bytes += d.used_bytes;
    }
    n.tier.stored_bytes = nvme_stored_bytes_;
    n.tier.blocks = nvme_blocks_;
    n.tier.evictions = counters_.nvme_evictions;
    n.tier.evictable_blocks = index_.candidate_count(PrefixIndex::kNvmeOnlyLeaf);
  }
  return snap;
}

std::vector<NamespaceSnapshot> BlockCache::Namespaces() {
  MutexLock lock(&mu_);
  std::vector<NamespaceSnapshot> out;
  for (const auto& [id, e] : namespaces_) {
    if (!e.opened) continue;  // recovered blocks not yet claimed by an engine
    out.push_back(NamespaceSnapshot{id, e.spec, e.block_bytes, e.blocks, e.bytes});
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.id.ToHex() < b.id.ToHex(); });
  return out;
}

absl::StatusOr<absl::Span<uint8_t>> BlockCache::MutableBytesForTesting(const NamespaceId& ns,
                                                                       const BlockKey& key) {
  MutexLock lock(&mu_);
  BlockRecord* rec = index_.Find(ns, key);
  if (rec == nullptr || !rec->in_host) return absl::NotFoundError("not cached in host memory");
  return absl::Span<uint8_t>(SlotData(rec->slot), rec->size);
}

}  // namespace kvtier
