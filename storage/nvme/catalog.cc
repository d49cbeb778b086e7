#include "storage/nvme/catalog.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "spdlog/spdlog.h"
#include "storage/slab_allocator.h"

namespace kvtier {
namespace {

constexpr uint8_t kValueVersion = 1;

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  const std::string msg = absl::StrCat("catalog ", what, ": ", s.ToString());
  if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
    return absl::UnavailableError(msg);
  }
  if (s.IsCorruption()) return absl::DataLossError(msg);
  if (s.IsNoSpace()) return absl::ResourceExhaustedError(msg);
  return absl::UnavailableError(msg);
}

// Opening a catalog writes before it can fail cleanly: a new MANIFEST
// (about the old one's size), its logs flushed into a table (about their
// size), OPTIONS, CURRENT and the first blocks of a new log. With the disk
// full, RocksDB 7.8 does not return an error for some of these writes but
// aborts on an assertion (WritableFileWriter, after a failed append). So the
// space is checked first; this much on top of the manifest and the logs.
constexpr uint64_t kOpenHeadroomBytes = uint64_t{1} << 20;

// Bytes this process may still write on the filesystem holding `path` (or
// its nearest existing ancestor); nullopt if unknown.
std::optional<uint64_t> WritableBytes(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) return std::nullopt;
  while (p.has_parent_path() && p != p.root_path() && !std::filesystem::exists(p, ec)) {
    p = p.parent_path();
  }
  struct statvfs st;
  if (statvfs(p.c_str(), &st) != 0) return std::nullopt;
  const uint64_t blocks = geteuid() == 0 ? st.f_bfree : st.f_bavail;  // root may use the reserve
  return blocks * st.f_frsize;
}

uint64_t BytesToOpen(const std::string& path) {
  uint64_t need = kOpenHeadroomBytes;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (!absl::EndsWith(name, ".log") && !absl::StartsWith(name, "MANIFEST-")) continue;
    std::error_code size_ec;
    const uintmax_t size = entry.file_size(size_ec);
    if (!size_ec) need += size;
  }
  return need;
}

// Fixed-size value: version, device, size class, offset, payload bytes,
// checksum, sequence, parent length, parent (32 bytes).
constexpr size_t kValueBytes = 1 + 4 + 4 + 8 * 4 + 1 + BlockKey::kMaxBytes;

}  // namespace

std::string EncodeCatalogKey(const NamespaceId& ns, const BlockKey& key) {
  std::string out;
  // Big-endian namespace so that one namespace's keys are contiguous.
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>(ns.high() >> (8 * i)));
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>(ns.low() >> (8 * i)));
  out.append(key.bytes().data(), key.size());
  return out;
}

std::string EncodeCatalogValue(const CatalogEntry& e) {
  std::string out;
  out.reserve(kValueBytes);
  out.push_back(static_cast<char>(kValueVersion));
  PutU32(&out, e.device);
  PutU32(&out, e.size_class);
  PutU64(&out, e.offset);
  PutU64(&out, e.payload_bytes);
  PutU64(&out, e.checksum);
  PutU64(&out, e.sequence);
  out.push_back(static_cast<char>(e.parent.size()));
  out.append(e.parent.bytes().data(), e.parent.size());
  out.resize(kValueBytes, '\0');
  return out;
}

absl::StatusOr<CatalogEntry> DecodeCatalogRecord(absl::string_view key, absl::string_view value) {
  if (key.size() <= 16 || key.size() > 16 + BlockKey::kMaxBytes) {
    return absl::DataLossError(absl::StrCat("catalog key of ", key.size(), " bytes"));
  }
  if (value.size() != kValueBytes || static_cast<uint8_t>(value[0]) != kValueVersion) {
    return absl::DataLossError(absl::StrCat("catalog value of ", value.size(), " bytes"));
  }
  CatalogEntry e;
  uint64_t high = 0, low = 0;
  for (int i = 0; i < 8; ++i) high = (high << 8) | static_cast<uint8_t>(key[i]);
  for (int i = 8; i < 16; ++i) low = (low << 8) | static_cast<uint8_t>(key[i]);
  e.ns = NamespaceId::FromParts(high, low);
  e.key = *BlockKey::Create(key.substr(16));
  const char* p = value.data() + 1;
  e.device = GetU32(p);
  e.size_class = GetU32(p + 4);
  e.offset = GetU64(p + 8);
  if (e.offset >= SlabAllocator::kMaxCapacity || e.size_class >= SlabAllocator::kMaxClasses) {
    return absl::DataLossError(absl::StrCat("catalog slot at offset ", e.offset, " of class ",
                                            e.size_class, " is out of any device's range"));
  }
  e.payload_bytes = GetU64(p + 16);
  e.checksum = GetU64(p + 24);
  e.sequence = GetU64(p + 32);
  const uint8_t parent_len = static_cast<uint8_t>(p[40]);
  if (parent_len > BlockKey::kMaxBytes) return absl::DataLossError("catalog parent length");
  if (parent_len > 0) e.parent = *BlockKey::Create(absl::string_view(p + 41, parent_len));
  return e;
}

absl::StatusOr<std::unique_ptr<Catalog>> Catalog::Open(const std::string& path) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.paranoid_checks = true;
  options.max_open_files = 256;
  const uint64_t need = BytesToOpen(path);
  if (const std::optional<uint64_t> room = WritableBytes(path); room && *room < need) {
    return absl::ResourceExhaustedError(
        absl::StrCat("nvme.dirs: catalog '", path, "': only ", *room,
                     " bytes free on its filesystem; opening it needs at least ", need,
                     " (RocksDB rewrites its manifest and flushes its log): free some space"));
  }
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, path, &db);
  if (!s.ok()) return FromRocks(s, absl::StrCat("open '", path, "'"));
  return std::unique_ptr<Catalog>(new Catalog(db, path));
}

Catalog::Catalog(rocksdb::DB* db, std::string path) : db_(db), path_(std::move(path)) {}

Catalog::~Catalog() {
  // A clean close leaves nothing in the write-ahead log, so the next open
  // reads the tables instead of replaying every write since the last
  // memtable flush (at 10^7 blocks, most of a restart). A flush writes a
  // table of up to the log's size: on a filesystem without that room (a
  // failed write there aborts the process in RocksDB) it is skipped, and the
  // next open replays the log, which still holds every entry.
  const uint64_t need = BytesToOpen(path_);
  if (const std::optional<uint64_t> room = WritableBytes(path_); room && *room < need) {
    spdlog::warn(
        "nvme catalog: {} bytes free, a flush at close needs {}; the next open replays "
        "the log",
        *room, need);
    return;
  }
  rocksdb::FlushOptions flush;
  flush.wait = true;
  flush.allow_write_stall = true;
  const rocksdb::Status s = db_->Flush(flush);
  if (!s.ok()) {
    spdlog::warn("nvme catalog: flush at close: {} (the next open replays the log)", s.ToString());
  }
}

absl::Status Catalog::Put(const CatalogEntry& entry) {
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(db_->Put(wo, EncodeCatalogKey(entry.ns, entry.key), EncodeCatalogValue(entry)),
                   "put");
}

absl::Status Catalog::PutBatch(absl::Span<const CatalogEntry> entries) {
  rocksdb::WriteBatch batch;
  for (const CatalogEntry& e : entries) {
    rocksdb::Status s = batch.Put(EncodeCatalogKey(e.ns, e.key), EncodeCatalogValue(e));
    if (!s.ok()) return FromRocks(s, "batch");
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(db_->Write(wo, &batch), "put batch");
}

absl::Status Catalog::Delete(const NamespaceId& ns, const BlockKey& key) {
  return FromRocks(db_->Delete(rocksdb::WriteOptions(), EncodeCatalogKey(ns, key)), "delete");
}

uint64_t Catalog::ApproximateCount() const {
  uint64_t n = 0;
  if (!db_->GetIntProperty(rocksdb::DB::Properties::kEstimateNumKeys, &n)) return 0;
  return n;
}

absl::Status Catalog::ForEach(const std::function<absl::Status(const CatalogEntry&)>& fn,
                              uint64_t* corrupt) {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  std::vector<std::string> bad;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const rocksdb::Slice k = it->key(), v = it->value();
    absl::StatusOr<CatalogEntry> e = DecodeCatalogRecord(absl::string_view(k.data(), k.size()),
                                                         absl::string_view(v.data(), v.size()));
    if (!e.ok()) {
      bad.emplace_back(k.data(), k.size());
      continue;
    }
    RETURN_IF_ERROR(fn(*e));
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "scan"));
  for (const std::string& k : bad) db_->Delete(rocksdb::WriteOptions(), k);
  if (corrupt != nullptr) *corrupt = bad.size();
  return absl::OkStatus();
}

}  // namespace kvtier
