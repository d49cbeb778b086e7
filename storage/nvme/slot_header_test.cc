#include "storage/nvme/slot_header.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvtier {
namespace {

SlotHeader Sample() {
  NamespaceSpec spec;
  spec.model_id = "m";
  spec.layout = KvLayout{1, 1, 128, DType::kBf16, 16, 0, 1};
  SlotHeader h;
  h.ns = NamespaceId::Of(spec);
  h.key = *BlockKey::Create(std::string(32, '\x7f'));
  h.parent = *BlockKey::Create("parent");
  h.payload_bytes = 2 << 20;
  h.payload_checksum = 0x0123456789abcdefull;
  h.sequence = 42;
  return h;
}

TEST(SlotHeaderTest, RoundTrips) {
  std::vector<uint8_t> buf(kSlotHeaderBytes, 0xee);
  EncodeSlotHeader(Sample(), absl::MakeSpan(buf));
  auto h = DecodeSlotHeader(buf);
  ASSERT_TRUE(h.ok()) << h.status();
  const SlotHeader want = Sample();
  EXPECT_EQ(h->ns, want.ns);
  EXPECT_EQ(h->key, want.key);
  EXPECT_EQ(h->parent, want.parent);
  EXPECT_EQ(h->payload_bytes, want.payload_bytes);
  EXPECT_EQ(h->payload_checksum, want.payload_checksum);
  EXPECT_EQ(h->sequence, 42u);
  // A root block has no parent.
  SlotHeader root = Sample();
  root.parent = BlockKey();
  EncodeSlotHeader(root, absl::MakeSpan(buf));
  EXPECT_TRUE(DecodeSlotHeader(buf)->parent.empty());
}

TEST(SlotHeaderTest, AnyFlippedByteIsDetected) {
  std::vector<uint8_t> buf(kSlotHeaderBytes);
  EncodeSlotHeader(Sample(), absl::MakeSpan(buf));
  for (size_t i = 0; i < 136; ++i) {
    std::vector<uint8_t> bad = buf;
    bad[i] ^= 0x40;
    EXPECT_EQ(DecodeSlotHeader(bad).status().code(), absl::StatusCode::kDataLoss) << "byte " << i;
  }
}

TEST(SlotHeaderTest, ZerosAndTruncationAreDataLoss) {
  std::vector<uint8_t> zeros(kSlotHeaderBytes, 0);
  EXPECT_EQ(DecodeSlotHeader(zeros).status().code(), absl::StatusCode::kDataLoss);
  std::vector<uint8_t> buf(kSlotHeaderBytes);
  EncodeSlotHeader(Sample(), absl::MakeSpan(buf));
  EXPECT_EQ(DecodeSlotHeader(absl::MakeConstSpan(buf).subspan(0, 100)).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace kvtier
