// RawCatalogScan: the baseline of the recovery benchmarks. Opens the RocksDB
// database at `path` with default options and iterates every record,
// touching key and value only. Returns the record count, or -1 if it cannot
// open. Header-only; benchmarks only.
#ifndef KVTIER_BENCH_RAW_CATALOG_SCAN_H_
#define KVTIER_BENCH_RAW_CATALOG_SCAN_H_

#include <rocksdb/db.h>

#include <cstdint>
#include <memory>
#include <string>

namespace kvtier::bench {

inline int64_t RawCatalogScan(const std::string& path) {
  rocksdb::DB* raw_db = nullptr;
  if (!rocksdb::DB::Open(rocksdb::Options(), path, &raw_db).ok()) return -1;
  std::unique_ptr<rocksdb::DB> db(raw_db);
  int64_t records = 0;
  uint64_t sink = 0;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    sink += static_cast<uint8_t>(it->key()[0]) + it->value().size();
    ++records;
  }
  // Every record has a non-empty value: a zero sink means nothing was read.
  return records > 0 && sink == 0 ? -1 : records;
}

}  // namespace kvtier::bench

#endif  // KVTIER_BENCH_RAW_CATALOG_SCAN_H_
