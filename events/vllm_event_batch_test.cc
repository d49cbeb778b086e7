#include "events/vllm_event_batch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "msgpack.hpp"
#include "testing/host_tier_fixture.h"  // Key

namespace kvtier {
namespace {

BlockEvent Stored(const std::string& key, const std::string& parent, Medium m = Medium::kHost) {
  return BlockEvent{.kind = BlockEvent::Kind::kStored,
                    .medium = m,
                    .ns = NamespaceId::FromParts(1, 2),
                    .key = Key(key),
                    .parent = parent.empty() ? BlockKey() : Key(parent),
                    .size = 4096};
}
BlockEvent Removed(const std::string& key, Medium m = Medium::kHost) {
  BlockEvent e = Stored(key, "", m);
  e.kind = BlockEvent::Kind::kRemoved;
  return e;
}

std::string Str(const msgpack::object& o) {
  EXPECT_EQ(o.type, msgpack::type::STR);
  return std::string(o.via.str.ptr, o.via.str.size);
}
std::string Bin(const msgpack::object& o) {
  EXPECT_EQ(o.type, msgpack::type::BIN);
  return std::string(o.via.bin.ptr, o.via.bin.size);
}
std::vector<std::string> Bins(const msgpack::object& o) {
  EXPECT_EQ(o.type, msgpack::type::ARRAY);
  std::vector<std::string> out;
  for (uint32_t i = 0; i < o.via.array.size; ++i) out.push_back(Bin(o.via.array.ptr[i]));
  return out;
}

TEST(VllmEventBatchTest, ChainsMergeIntoOneBlockStoredAndLayoutIsVllms) {
  const std::vector<BlockEvent> events = {Stored("a", ""),
                                          Stored("b", "a"),
                                          Stored("c", "b"),                // one chain
                                          Stored("x", "a"),                // a branch: a new event
                                          Stored("a", "", Medium::kNvme),  // another medium
                                          Removed("c"),
                                          Removed("x"),  // one removal
                                          Removed("a", Medium::kNvme)};
  auto sixteen = [](const NamespaceId&) { return uint32_t{16}; };
  const std::string payload =
      EncodeVllmEventBatch(1234.5, events, {.int_hashes = false, .block_size = sixteen});
  msgpack::object_handle h = msgpack::unpack(payload.data(), payload.size());
  const msgpack::object& batch = h.get();
  ASSERT_EQ(batch.type, msgpack::type::ARRAY);
  ASSERT_EQ(batch.via.array.size, 2u);  // [ts, events]: no dp rank
  EXPECT_EQ(batch.via.array.ptr[0].type, msgpack::type::FLOAT64);
  EXPECT_DOUBLE_EQ(batch.via.array.ptr[0].via.f64, 1234.5);
  const msgpack::object& list = batch.via.array.ptr[1];
  ASSERT_EQ(list.type, msgpack::type::ARRAY);
  ASSERT_EQ(list.via.array.size, 5u);
  const msgpack::object* ev = list.via.array.ptr;

  // ["BlockStored", hashes, parent, token_ids, block_size, lora_id, medium, lora_name]
  ASSERT_EQ(ev[0].via.array.size, 8u);
  const msgpack::object* f = ev[0].via.array.ptr;
  EXPECT_EQ(Str(f[0]), "BlockStored");
  EXPECT_EQ(Bins(f[1]), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(f[2].type, msgpack::type::NIL);  // a root
  EXPECT_EQ(f[3].type, msgpack::type::ARRAY);
  EXPECT_EQ(f[3].via.array.size, 0u);
  EXPECT_EQ(f[4].as<uint32_t>(), 16u);
  EXPECT_EQ(f[5].type, msgpack::type::NIL);
  EXPECT_EQ(Str(f[6]), "CPU");
  EXPECT_EQ(f[7].type, msgpack::type::NIL);

  f = ev[1].via.array.ptr;
  EXPECT_EQ(Bins(f[1]), std::vector<std::string>{"x"});
  EXPECT_EQ(Bin(f[2]), "a");
  f = ev[2].via.array.ptr;
  EXPECT_EQ(Bins(f[1]), std::vector<std::string>{"a"});
  EXPECT_EQ(Str(f[6]), "STORAGE");

  // ["BlockRemoved", hashes, medium]
  ASSERT_EQ(ev[3].via.array.size, 3u);
  f = ev[3].via.array.ptr;
  EXPECT_EQ(Str(f[0]), "BlockRemoved");
  EXPECT_EQ(Bins(f[1]), (std::vector<std::string>{"c", "x"}));
  EXPECT_EQ(Str(f[2]), "CPU");
  EXPECT_EQ(Str(ev[4].via.array.ptr[2]), "STORAGE");
}

TEST(VllmEventBatchTest, AllBlocksClearedComesFirstWhenAsked) {
  auto sixteen = [](const NamespaceId&) { return uint32_t{16}; };
  const std::string payload =
      EncodeVllmEventBatch(1.0, {Stored("a", "")},
                           {.int_hashes = false, .block_size = sixteen, .all_cleared_first = true});
  msgpack::object_handle h = msgpack::unpack(payload.data(), payload.size());
  const msgpack::object& list = h.get().via.array.ptr[1];
  ASSERT_EQ(list.via.array.size, 2u);
  ASSERT_EQ(list.via.array.ptr[0].via.array.size, 1u);
  EXPECT_EQ(Str(list.via.array.ptr[0].via.array.ptr[0]), "AllBlocksCleared");
  EXPECT_EQ(Str(list.via.array.ptr[1].via.array.ptr[0]), "BlockStored");
  const std::string empty = EncodeVllmEventBatch(1.0, {}, {.block_size = sixteen});
  h = msgpack::unpack(empty.data(), empty.size());
  EXPECT_EQ(h.get().via.array.ptr[1].via.array.size, 0u);
}

TEST(VllmEventBatchTest, IntHashesAreTheKeysLow64BitsAsVllmSendsThem) {
  // vLLM: int.from_bytes(hash, "big") & (2**64 - 1).
  EXPECT_EQ(IntBlockHash(Key("\x01\x02")), 0x0102u);
  const BlockKey long_key = *BlockKey::Create("0123456789abcdef");  // 16 bytes
  EXPECT_EQ(IntBlockHash(long_key), 0x3839616263646566u);           // "89abcdef"
  BlockEvent child = Stored("x", "");
  child.key = long_key;
  child.parent = Key("\x01\x02");
  auto zero = [](const NamespaceId&) { return uint32_t{0}; };
  const std::string payload = EncodeVllmEventBatch(2.0, {child}, {.block_size = zero});
  msgpack::object_handle h = msgpack::unpack(payload.data(), payload.size());
  const msgpack::object& stored = h.get().via.array.ptr[1].via.array.ptr[0];
  ASSERT_EQ(stored.via.array.ptr[1].via.array.size, 1u);
  EXPECT_EQ(stored.via.array.ptr[1].via.array.ptr[0].type, msgpack::type::POSITIVE_INTEGER);
  EXPECT_EQ(stored.via.array.ptr[1].via.array.ptr[0].as<uint64_t>(), 0x3839616263646566u);
  EXPECT_EQ(stored.via.array.ptr[2].as<uint64_t>(), 0x0102u);
}

TEST(VllmEventBatchTest, ChainsOfDifferentNamespacesAreSeparateEvents) {
  BlockEvent a = Stored("a", "");
  BlockEvent b = Stored("b", "a");
  b.ns = NamespaceId::FromParts(3, 4);  // same keys, another model
  auto size = [](const NamespaceId& ns) { return ns == NamespaceId::FromParts(3, 4) ? 32u : 16u; };
  const std::string payload = EncodeVllmEventBatch(1.0, {a, b}, {.block_size = size});
  msgpack::object_handle h = msgpack::unpack(payload.data(), payload.size());
  const msgpack::object& list = h.get().via.array.ptr[1];
  ASSERT_EQ(list.via.array.size, 2u);
  EXPECT_EQ(list.via.array.ptr[0].via.array.ptr[4].as<uint32_t>(), 16u);
  EXPECT_EQ(list.via.array.ptr[1].via.array.ptr[4].as<uint32_t>(), 32u);
}

}  // namespace
}  // namespace kvtier
