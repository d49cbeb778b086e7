// Catalog: the durable index of the blocks persisted on the NVMe tier, kept in
// RocksDB with its write-ahead log on. Key: namespace id (16 bytes) + block
// key. Value: where the block's slot is and what it must contain. A block
// counts as persisted only once its slot write is durable and then its
// catalog entry is committed with a synced write (Put), in that order; on
// restart the daemon rebuilds its NVMe index from the catalog alone
// (ForEach), without scanning the data files, and verifies each slot's
// header and checksum when it is first read.
//
// Thread-safety: thread-safe (RocksDB is).
#ifndef KVTIER_STORAGE_NVME_CATALOG_H_
#define KVTIER_STORAGE_NVME_CATALOG_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "storage/block_key.h"
#include "storage/namespace_spec.h"

namespace rocksdb {
class DB;
}

namespace kvtier {

struct CatalogEntry {
  NamespaceId ns;
  BlockKey key;
  BlockKey parent;
  uint32_t device = 0;      // index of the data directory
  uint64_t offset = 0;      // slot offset within the device's space
  uint32_t size_class = 0;  // slab allocator class of the slot
  uint64_t payload_bytes = 0;
  uint64_t checksum = 0;  // XXH3-64 of the payload
  uint64_t sequence = 0;  // write sequence, also in the slot header
};

// Value encoding (the key holds ns and key). DecodeCatalogValue returns
// DATA_LOSS for a value it cannot read.
std::string EncodeCatalogKey(const NamespaceId& ns, const BlockKey& key);
std::string EncodeCatalogValue(const CatalogEntry& entry);
absl::StatusOr<CatalogEntry> DecodeCatalogRecord(absl::string_view key, absl::string_view value);

class Catalog {
 public:
  // Opens (creating if needed) the catalog at `path`. UNAVAILABLE if RocksDB
  // cannot open it (e.g. another daemon holds its lock); RESOURCE_EXHAUSTED,
  // before RocksDB is called, when its filesystem lacks the room opening
  // writes (a full disk would otherwise abort the process in RocksDB).
  static absl::StatusOr<std::unique_ptr<Catalog>> Open(const std::string& path);
  // Flushes the memtable (a clean close leaves no log to replay), unless the
  // filesystem lacks the room a flush writes: then the next open replays.
  ~Catalog();
  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;

  // Commits an entry durably (WAL fsync) before returning.
  absl::Status Put(const CatalogEntry& entry);
  // Commits several entries atomically with one synced write.
  absl::Status PutBatch(absl::Span<const CatalogEntry> entries);
  // Removes an entry. Not synced: an entry that survives a crash points at a
  // slot whose header then disagrees (or matches the same block), which is
  // detected on read.
  absl::Status Delete(const NamespaceId& ns, const BlockKey& key);
  // Calls `fn` for every entry; an undecodable record is skipped and counted
  // in *corrupt (if given) and removed. Stops at the first error `fn` returns.
  absl::Status ForEach(const std::function<absl::Status(const CatalogEntry&)>& fn,
                       uint64_t* corrupt = nullptr);
  // RocksDB's estimate of the number of entries (deleted ones may still
  // count until compacted): a capacity hint, never a count to rely on.
  uint64_t ApproximateCount() const;

 private:
  Catalog(rocksdb::DB* db, std::string path);
  std::unique_ptr<rocksdb::DB> db_;
  const std::string path_;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NVME_CATALOG_H_
