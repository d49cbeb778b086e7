// libFuzzer target: the parsers of bytes the daemon reads back from disk,
// which a crash, a bad disk or another program may have left in any state:
// NVMe slot headers and catalog records. The first input byte picks the
// parser. Properties: no crash or sanitizer report on any input; whatever
// decodes, re-encodes to bytes that decode to the same values.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "storage/nvme/catalog.h"
#include "storage/nvme/slot_header.h"

namespace kvtier {
namespace {

void CheckSlotHeader(const uint8_t* data, size_t size) {
  absl::StatusOr<SlotHeader> h = DecodeSlotHeader(absl::MakeConstSpan(data, size));
  if (!h.ok()) return;
  std::vector<uint8_t> again(kSlotHeaderBytes);
  EncodeSlotHeader(*h, absl::MakeSpan(again));
  absl::StatusOr<SlotHeader> h2 = DecodeSlotHeader(again);
  if (!h2.ok() || !(h2->ns == h->ns) || !(h2->key == h->key) || !(h2->parent == h->parent) ||
      h2->payload_bytes != h->payload_bytes || h2->payload_checksum != h->payload_checksum ||
      h2->sequence != h->sequence) {
    std::abort();
  }
}

void CheckCatalogRecord(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const size_t key_len = std::min<size_t>(data[0], size - 1);
  const std::string key(reinterpret_cast<const char*>(data + 1), key_len);
  const std::string value(reinterpret_cast<const char*>(data + 1 + key_len), size - 1 - key_len);
  absl::StatusOr<CatalogEntry> e = DecodeCatalogRecord(key, value);
  if (!e.ok()) return;
  absl::StatusOr<CatalogEntry> e2 =
      DecodeCatalogRecord(EncodeCatalogKey(e->ns, e->key), EncodeCatalogValue(*e));
  if (!e2.ok() || !(e2->ns == e->ns) || !(e2->key == e->key) || !(e2->parent == e->parent) ||
      e2->device != e->device || e2->offset != e->offset || e2->size_class != e->size_class ||
      e2->payload_bytes != e->payload_bytes || e2->checksum != e->checksum ||
      e2->sequence != e->sequence) {
    std::abort();
  }
}

}  // namespace
}  // namespace kvtier

// KVTIER_FUZZ_WRITE_SEEDS=DIR: write valid examples of both formats there
// (how tests/fuzz/storage_corpus was made).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace kvtier;
  const char* dir = std::getenv("KVTIER_FUZZ_WRITE_SEEDS");
  if (dir == nullptr) return 0;
  SlotHeader h;
  h.ns = NamespaceId::FromParts(0x1234, 0x5678);
  h.key = *BlockKey::Create("block-1");
  h.parent = *BlockKey::Create("block-0");
  h.payload_bytes = 32768;
  h.payload_checksum = 0xfeedbeef;
  h.sequence = 42;
  std::vector<uint8_t> bytes(kSlotHeaderBytes);
  EncodeSlotHeader(h, absl::MakeSpan(bytes));
  std::ofstream(std::string(dir) + "/slot_header", std::ios::binary)
      << '\0' << std::string(bytes.begin(), bytes.end());
  CatalogEntry e{h.ns, h.key, h.parent, 1, 8192, 3, 32768, 0xfeedbeef, 42};
  const std::string k = EncodeCatalogKey(e.ns, e.key), v = EncodeCatalogValue(e);
  std::ofstream(std::string(dir) + "/catalog_record", std::ios::binary)
      << '\1' << static_cast<char>(k.size()) << k << v;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] % 2 == 0) {
    kvtier::CheckSlotHeader(data + 1, size - 1);
  } else {
    kvtier::CheckCatalogRecord(data + 1, size - 1);
  }
  return 0;
}
