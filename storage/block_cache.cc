// BlockCache, the facade: creation, namespaces, leases, reads, the mover
// and introspection, sequencing the pieces it owns (see block_cache.h)
// around its mutex. Lookups and leases are in block_cache_lookup.cc, puts
// in put_batch.cc, removals in block_cache_removal.cc.
#include "storage/block_cache.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
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
  ASSIGN_OR_RETURN(std::unique_ptr<EvictionPolicy> policy,
                   EvictionPolicyByName(options.eviction_policy));
  ASSIGN_OR_RETURN(std::unique_ptr<SlabAllocator> allocator,
                   SlabAllocator::Create(options.host_bytes, options.slab_bytes));
  ASSIGN_OR_RETURN(
      std::unique_ptr<HostArena> arena,
      HostArena::Create(
          allocator->capacity(),
          options.huge_pages ? HostArena::Pages::kTransparentHuge : HostArena::Pages::kBase,
          options.prefault_host ? HostArena::Commit::kAtCreate : HostArena::Commit::kOnFirstTouch));
  std::unique_ptr<BlockCache> cache(
      new BlockCache(options, clock, std::move(arena), std::move(allocator), std::move(policy)));
  BlockCache* c = cache.get();
  if (options.nvme.has_value()) {
    // Validates the NVMe options and parses the write policy, once.
    ASSIGN_OR_RETURN(std::unique_ptr<NvmeTier> nvme,
                     NvmeTier::Open(*options.nvme, options.max_block_bytes, options.slab_bytes,
                                    c->arena_, clock));
    MutexLock lock(&c->mu_);
    c->nvme_ = std::move(nvme);
    c->host_.set_nvme(c->nvme_.get());
    ASSIGN_OR_RETURN(RecoveryResult recovered,
                     c->nvme_->Recover(&c->index_, options.max_block_bytes,
                                       [c](const CatalogEntry& e) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                         c->namespaces_.AddRecoveredBlock(e.ns, e.payload_bytes);
                                       }));
    c->counters_.recovered_blocks = recovered.recovered;
    c->counters_.recovery_dropped = recovered.dropped;
    c->mover_pass_ = std::make_unique<Mover>(c->nvme_.get(), &c->host_, &c->index_, &c->namespaces_,
                                             &c->counters_);
  }
  {
    MutexLock lock(&c->mu_);
    c->read_ = std::make_unique<ReadPath>(&c->host_, c->nvme_.get(), &c->index_, &c->counters_);
  }
  if (options.nvme.has_value() && options.nvme->start_mover) {
    c->mover_ = std::thread([c] { c->MoverLoop(); });
  }
  if (options.probe_tiers) c->ProbeTiers();
  return cache;
}

void BlockCache::ProbeTiers() {
  const TransferEstimate host = ProbeMemoryCopy(options_.probe_bytes);
  host_meter_.Seed(host.bytes_per_s, host.latency_s, "probe");
  spdlog::info("host tier probe: {:.2f} GB/s, {:.1f} us", host.bytes_per_s / 1e9,
               host.latency_s * 1e6);
  if (nvme_ == nullptr) return;
  const std::string& dir = options_.nvme->store.dirs.front();
  {
    MutexLock lock(&mu_);
    if (!nvme_->wear(0).TryConsume(options_.probe_bytes)) {
      spdlog::warn("nvme probe skipped: the write budget of {} is exhausted", dir);
      return;
    }
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

BlockCache::BlockCache(const BlockCacheOptions& options, Clock* clock,
                       std::unique_ptr<HostArena> arena, std::unique_ptr<SlabAllocator> allocator,
                       std::unique_ptr<EvictionPolicy> policy)
    : options_(options),
      clock_(clock),
      arena_(arena->data(), arena->size()),
      host_huge_pages_(arena->huge_pages_advised()),
      policy_(std::move(policy)),
      index_(policy_.get()),
      quotas_([&] {
        TenantLimits limits = options.tenant;
        if (limits.max_namespaces == 0) limits.max_namespaces = options.max_namespaces;
        if (limits.max_leases == 0) limits.max_leases = options.max_leases;
        if (limits.max_reserved_bytes == 0) limits.max_reserved_bytes = options.host_bytes;
        return limits;
      }()),
      namespaces_(options.max_namespaces, &quotas_),
      host_(std::move(arena), std::move(allocator), &index_, &namespaces_, &counters_),
      groups_(&index_, &host_) {
  MutexLock lock(&mu_);
  host_.set_groups(&groups_);
}

BlockCache::~BlockCache() {
  stop_mover_.Notify();
  if (mover_.joinable()) mover_.join();
}

absl::Status BlockCache::SetRetentionValue(const NamespaceId& ns, double seconds_per_byte) {
  if (!std::isfinite(seconds_per_byte) || seconds_per_byte <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "retention value must be finite and > 0 seconds per byte, not ", seconds_per_byte));
  }
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(namespaces_.SetRetentionValue(ns, seconds_per_byte));
  policy_->SetDefaultValue(namespaces_.MeanRetentionValue());
  return absl::OkStatus();
}

absl::StatusOr<size_t> BlockCache::SetRetention(const NamespaceId& ns,
                                                absl::Span<const BlockKey> keys,
                                                uint8_t retention) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(NamespaceEntry * entry, namespaces_.FindOpen(ns));
  if (entry->spec.hybrid()) {
    return absl::UnimplementedError(
        "retention priorities on a Lookup of a namespace with layer groups are not supported "
        "yet; give them with Save or Put");
  }
  std::vector<BlockRecord*> matched;
  index_.MatchChain(ns, keys, &matched);
  for (BlockRecord* rec : matched) {
    rec->retention = std::min(retention, kMaxRetention);
    index_.Reclassify(rec);  // refiled at its new priority
  }
  return matched.size();
}

absl::Status BlockCache::SetNvmeAdmission(const NamespaceId& ns, bool admit) {
  MutexLock lock(&mu_);
  return namespaces_.SetNvmeAdmission(ns, admit);
}

absl::StatusOr<OpenNamespaceResult> BlockCache::OpenNamespace(const NamespaceSpec& spec) {
  RETURN_IF_ERROR(ValidateNamespaceSpec(spec, options_.max_block_bytes));
  NamespaceSpec normalized = spec;
  if (normalized.layout.tp_size == 0) normalized.layout.tp_size = 1;
  if (!normalized.hybrid()) normalized.groups.clear();
  const NamespaceId id = NamespaceId::Of(normalized);
  std::vector<uint64_t> group_bytes;
  uint64_t block_bytes = 0;
  if (normalized.hybrid()) {
    for (const LayerGroup& g : normalized.groups) {
      group_bytes.push_back(*GroupBlockBytes(GeometryOf(normalized.layout), g));
      block_bytes = std::max(block_bytes, group_bytes.back());
    }
  } else {
    block_bytes = *BlockBytes(normalized.layout);
  }
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(OpenedNamespace opened, namespaces_.Open(id, normalized, block_bytes));
  if (!group_bytes.empty()) {
    namespaces_.OpenGroups(id, normalized, group_bytes);
    counters_.group_blocks_unusable += groups_.Open(id, normalized);
  }
  return OpenNamespaceResult{id, opened.block_bytes, opened.created, std::move(group_bytes)};
}

absl::StatusOr<NamespaceId> BlockCache::StorageOf(const NamespaceId& ns,
                                                  const NamespaceEntry& entry, uint32_t group) {
  const size_t groups = entry.spec.hybrid() ? entry.spec.groups.size() : 1;
  if (group >= groups) {
    return absl::InvalidArgumentError(
        absl::StrCat("group ", group, ": namespace ", ns.ToHex(), " has ", groups, " group(s)"));
  }
  return entry.spec.hybrid() ? NamespaceId::OfGroup(ns, group) : ns;
}

void BlockCache::SweepGroupsLocked() { counters_.group_blocks_unusable += groups_.SweepPending(); }

TenantUsage BlockCache::UsageOf(absl::string_view tenant) {
  MutexLock lock(&mu_);
  return quotas_.Usage(tenant);
}

absl::StatusOr<uint64_t> BlockCache::NamespaceBlockBytes(const NamespaceId& ns) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto* entry, namespaces_.FindOpen(ns));
  return entry->block_bytes;
}

absl::Status BlockCache::CheckTenant(const NamespaceId& ns, absl::string_view tenant) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto* entry, namespaces_.FindOpen(ns));
  // Another tenant's namespace reads exactly as one that is not open: ids
  // are public hashes, so any other answer would tell a tenant which models
  // its neighbours serve.
  if (entry->spec.tenant != tenant) return NamespaceNotOpenError(ns);
  return absl::OkStatus();
}

absl::Status BlockCache::CheckKeyCount(size_t n) const {
  if (n == 0 || n > options_.max_keys_per_request) {
    return absl::InvalidArgumentError(
        absl::StrCat("request has ", n, " keys; must be 1..", options_.max_keys_per_request));
  }
  return absl::OkStatus();
}

absl::StatusOr<SlabAllocator::Slot> BlockCache::AllocateLocked(uint64_t size) {
  ExpireLeasesLocked();
  absl::StatusOr<SlabAllocator::Slot> slot = host_.Allocate(size);
  SweepGroupsLocked();  // what the evictions may have stranded
  return slot;
}

void BlockCache::Unpin(BlockRecord* record) {
  MutexLock lock(&mu_);
  host_.Unpin(record);
  SweepGroupsLocked();  // a useless block a reader pinned may go now
}

// ---------------------------------------------------------------------------
// Read (the phases are ReadPath's)

BlockCache::ReadHandle::ReadHandle(ReadHandle&& other) noexcept
    : cache_(std::exchange(other.cache_, nullptr)),
      record_(std::exchange(other.record_, nullptr)),
      parent_(other.parent_) {}

BlockCache::ReadHandle& BlockCache::ReadHandle::operator=(ReadHandle&& other) noexcept {
  if (this != &other) {
    if (cache_ != nullptr) cache_->Unpin(record_);
    cache_ = std::exchange(other.cache_, nullptr);
    record_ = std::exchange(other.record_, nullptr);
    parent_ = other.parent_;
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
    host_.Unpin(h.record_);
    h.cache_ = nullptr;
  }
}

absl::StatusOr<std::vector<BlockCache::ReadHandle>> BlockCache::Read(
    const NamespaceId& ns, absl::Span<const BlockKey> keys, bool verify, uint32_t group) {
  RETURN_IF_ERROR(CheckKeyCount(keys.size()));
  std::vector<BlockRecord*> blocks;
  std::vector<ReadHandle> handles;
  ReadPath::Promotion promotion;
  {
    MutexLock lock(&mu_);
    ExpireLeasesLocked();
    ASSIGN_OR_RETURN(NamespaceEntry * entry, namespaces_.FindOpen(ns));
    ASSIGN_OR_RETURN(const NamespaceId storage, StorageOf(ns, *entry, group));
    ASSIGN_OR_RETURN(
        std::vector<BlockRecord*> pinned,
        read_->Pin(
            storage, keys,
            [this](uint64_t size) ABSL_NO_THREAD_SAFETY_ANALYSIS { return AllocateLocked(size); },
            &promotion));
    blocks = std::move(pinned);
    handles.reserve(blocks.size());
    for (BlockRecord* rec : blocks) handles.push_back(ReadHandle(this, rec));
  }
  if (!promotion.empty()) {
    read_->Promote(promotion, &nvme_meter_);
    MutexLock lock(&mu_);
    if (absl::Status s = read_->Publish(promotion); !s.ok()) {
      ReleaseHandlesLocked(handles);
      return s;
    }
  }
  // Every handle's block is now in host memory: pinned blocks never lose
  // their host copy, and every block that lacked one was promoted above
  // (by this call or, first, by a concurrent one).
  {
    MutexLock lock(&mu_);
    counters_.host_hits += handles.size() - promotion.blocks.size();
  }
  // Verify outside the lock: pinned slots are never rewritten.
  std::vector<BlockRecord*> corrupt;
  if (verify) corrupt = read_->Verify(blocks, &host_meter_);
  MutexLock lock(&mu_);
  if (absl::Status s = read_->Finish(blocks, corrupt); !s.ok()) {
    ReleaseHandlesLocked(handles);
    SweepGroupsLocked();
    return s;
  }
  return handles;
}

void BlockCache::ReportChecksumMismatch(const ReadHandle& handle) {
  MutexLock lock(&mu_);
  read_->DropCorrupt(handle.record_);  // the handle's pin keeps the record alive until it goes
  SweepGroupsLocked();
}

absl::StatusOr<std::pair<std::vector<BlockView>, uint64_t>> BlockCache::TopBlocks(
    const NamespaceId& ns, size_t top) {
  MutexLock lock(&mu_);
  if (absl::StatusOr<NamespaceEntry*> entry = namespaces_.FindOpen(ns); !entry.ok()) {
    return entry.status();
  }
  std::vector<const BlockRecord*> all;
  if (const HybridGroups* h = groups_.Find(ns); h != nullptr) {  // its groups' blocks
    for (const NamespaceId& storage : h->storage) {
      index_.ForEachIn(storage, [&](const BlockRecord& r) { all.push_back(&r); });
    }
  } else {
    index_.ForEachIn(ns, [&](const BlockRecord& r) { all.push_back(&r); });
  }
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
    out.push_back(BlockView{r.key, r.parent_key(), r.size, r.in_host, r.on_nvme, r.uses, r.leases,
                            static_cast<uint32_t>(r.children().size())});
  }
  return std::make_pair(std::move(out), static_cast<uint64_t>(all.size()));
}

// ---------------------------------------------------------------------------
// NVMe movement (the pass is Mover's)

size_t BlockCache::RunMoverOnce() {
  if (nvme_ == nullptr) return 0;
  MutexLock pass_lock(&mover_mu_);
  Mover::Pass pass;
  {
    MutexLock lock(&mu_);
    ExpireLeasesLocked();
    pass = mover_pass_->Select();
  }
  size_t written = 0;
  if (!pass.empty()) {
    mover_pass_->Write(pass);
    MutexLock lock(&mu_);
    written = mover_pass_->Finish(pass);
  }
  MutexLock lock(&mu_);
  mover_pass_->Balance();
  SweepGroupsLocked();
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

std::vector<DeviceWear> BlockCache::Wear() {
  if (nvme_ == nullptr) return {};
  return nvme_->Wear();
}

void BlockCache::MoverLoop() {
  const absl::Duration interval = options_.nvme->mover_interval;
  while (true) {
    if (stop_mover_.WaitForNotificationWithTimeout(interval)) return;
    RunMoverOnce();
  }
}

// ---------------------------------------------------------------------------
// Introspection

CacheSnapshot BlockCache::Snapshot(bool scan_for_stranded) {
  MutexLock lock(&mu_);
  ExpireLeasesLocked();
  CacheSnapshot snap;
  snap.namespaces = static_cast<uint32_t>(namespaces_.open_count());
  snap.blocks = index_.size();
  snap.bytes = namespaces_.total_bytes();
  snap.active_leases = static_cast<uint32_t>(leases_.size());
  snap.eviction_policy = std::string(policy_->name());
  snap.eviction_history_bytes = policy_->memory_bytes();
  if (scan_for_stranded) {
    snap.stranded_blocks = index_.CountStranded(&snap.stranded_bytes);
    // A hybrid's group bytes that no restorable cut can use (invariant 9).
    for (const auto& [id, e] : namespaces_.entries()) {
      const HybridGroups* h = e.group_of ? nullptr : groups_.Find(id);
      if (h == nullptr) continue;
      for (const GroupStranded& g : groups_.CountStranded(*h)) {
        snap.stranded_blocks += g.blocks;
        snap.stranded_bytes += g.bytes;
      }
    }
  }
  snap.counters = counters_;
  snap.host.capacity_bytes = host_.capacity();
  snap.host.used_bytes = host_.used_bytes();
  snap.host.stored_bytes = host_.stored_bytes();
  snap.host.blocks = host_.blocks();
  snap.host.evictions = counters_.evictions + counters_.host_copies_dropped;
  snap.host.evictable_blocks = index_.candidate_count(PrefixIndex::kHostOnlyLeaf) +
                               index_.candidate_count(PrefixIndex::kHostCopy);
  if (nvme_ != nullptr) {
    snap.nvme = nvme_->Snapshot();
    snap.nvme.tier.evictions = counters_.nvme_evictions;
    snap.nvme.tier.evictable_blocks = index_.candidate_count(PrefixIndex::kNvmeOnlyLeaf);
  }
  return snap;
}

std::vector<NamespaceSnapshot> BlockCache::Namespaces(bool scan_for_stranded) {
  MutexLock lock(&mu_);
  std::vector<NamespaceSnapshot> out;
  for (const auto& [id, e] : namespaces_.entries()) {
    // Recovered blocks not yet claimed by an engine; groups (below).
    if (!e.opened || e.group_of) continue;
    NamespaceSnapshot snap{id, e.spec, e.block_bytes, e.blocks, e.bytes, {}};
    if (const HybridGroups* h = groups_.Find(id); h != nullptr && e.spec.hybrid()) {
      std::vector<GroupStranded> stranded;
      if (scan_for_stranded) stranded = groups_.CountStranded(*h);
      for (size_t g = 0; g < h->storage.size(); ++g) {
        GroupSnapshot gs;
        gs.kind = h->groups[g].kind;
        gs.storage_id = h->storage[g];
        if (const NamespaceEntry* ge = namespaces_.FindAny(h->storage[g])) {
          gs.block_bytes = ge->block_bytes;
          gs.blocks = ge->blocks;
          gs.bytes = ge->bytes;
          gs.evictions = ge->evictions;
        }
        if (scan_for_stranded) {
          index_.ForEachIn(h->storage[g], [&](const BlockRecord& r) {
            gs.in_host_blocks += r.in_host;
            gs.on_nvme_blocks += r.on_nvme;
          });
          gs.stranded_blocks = stranded[g].blocks;
          gs.stranded_bytes = stranded[g].bytes;
        }
        snap.blocks += gs.blocks;
        snap.bytes += gs.bytes;
        snap.groups.push_back(gs);
      }
    }
    out.push_back(std::move(snap));
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
