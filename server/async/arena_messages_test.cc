#include "server/async/arena_messages.h"

#include <gtest/gtest.h>

#include <string>

#include "kvtier/v1/kvcache.pb.h"

namespace kvtier {
namespace {

using LookupMessages = ArenaMessages<v1::LookupRequest, v1::LookupResponse>;

// Parses a Lookup of `keys` keys into the holder's request, answers each
// key in its response and checks the answer survives a round trip.
void RoundTrip(grpc::MessageHolder<v1::LookupRequest, v1::LookupResponse>& m, int keys) {
  v1::LookupRequest sent;
  sent.set_namespace_id("ns-1");
  for (int i = 0; i < keys; ++i) sent.add_keys(std::string(32, static_cast<char>('a' + i % 26)));
  ASSERT_TRUE(m.request()->ParseFromString(sent.SerializeAsString()));
  ASSERT_EQ(m.request()->keys_size(), keys);
  EXPECT_EQ(m.request()->namespace_id(), "ns-1");
  for (const std::string& key : m.request()->keys()) {
    v1::BlockInfo* info = m.response()->add_blocks();
    info->set_key(key);
    info->set_size_bytes(4096);
  }
  m.response()->set_matched(static_cast<uint32_t>(keys));
  v1::LookupResponse got;
  ASSERT_TRUE(got.ParseFromString(m.response()->SerializeAsString()));
  ASSERT_EQ(got.blocks_size(), keys);
  EXPECT_EQ(got.matched(), static_cast<uint32_t>(keys));
  EXPECT_EQ(got.blocks(keys - 1).key(), sent.keys(keys - 1));
  EXPECT_EQ(got.blocks(0).size_bytes(), 4096u);
}

TEST(ArenaMessagesTest, BothMessagesLiveOnOneArenaPerCall) {
  LookupMessages allocator;
  auto* a = allocator.AllocateMessages();
  auto* b = allocator.AllocateMessages();
  ASSERT_NE(a->request()->GetArena(), nullptr);
  EXPECT_EQ(a->request()->GetArena(), a->response()->GetArena());
  EXPECT_NE(a->request()->GetArena(), b->request()->GetArena());
  EXPECT_EQ(a->request()->keys_size(), 0);
  EXPECT_EQ(a->response()->blocks_size(), 0);
  a->Release();
  b->Release();
}

TEST(ArenaMessagesTest, ALookupOf128KeysAndItsFullAnswerFitTheFirstBlock) {
  LookupMessages allocator;
  auto* m = allocator.AllocateMessages();
  RoundTrip(*m, 128);
  // Nothing beyond the first block: the arena's space is the block the
  // holder brought.
  EXPECT_EQ(m->request()->GetArena()->SpaceAllocated(), LookupMessages::kFirstBlockBytes)
      << "used " << m->request()->GetArena()->SpaceUsed();
  m->Release();
}

TEST(ArenaMessagesTest, CallLargerThanTheFirstBlockGrowsTheArena) {
  LookupMessages allocator;
  auto* m = allocator.AllocateMessages();
  RoundTrip(*m, 4096);
  EXPECT_GT(m->request()->GetArena()->SpaceAllocated(), LookupMessages::kFirstBlockBytes);
  m->Release();  // ASan: the grown blocks and the keys' strings are freed
}

}  // namespace
}  // namespace kvtier
