#include "storage/groups/layer_group.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "storage/namespace_spec.h"

namespace kvtier {
namespace {

std::vector<uint32_t> Layers(uint32_t first, uint32_t count, uint32_t step = 1) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < count; ++i) out.push_back(first + i * step);
  return out;
}

// gpt-oss-120b on one rank: 36 layers alternating sliding (128 tokens) and
// full attention, 8 KV heads of 64 dims, bf16, 16-token blocks.
NamespaceSpec GptOss() {
  NamespaceSpec s;
  s.model_id = "openai/gpt-oss-120b";
  s.layout = KvLayout{36, 8, 64, DType::kBf16, 16, 0, 1};
  s.groups = {{GroupKind::kSlidingWindow, Layers(0, 18, 2), 128, 0, 0},
              {GroupKind::kFullAttention, Layers(1, 18, 2), 0, 0, 0}};
  return s;
}

// A Mamba hybrid: 4 attention layers among 12, 8 recurrent layers with a
// snapshot of 1 MiB every 64 tokens.
NamespaceSpec MambaHybrid() {
  NamespaceSpec s;
  s.model_id = "hybrid";
  s.layout = KvLayout{12, 8, 128, DType::kBf16, 16, 0, 1};
  s.groups = {{GroupKind::kFullAttention, {2, 5, 8, 11}, 0, 0, 0},
              {GroupKind::kRecurrent, {0, 1, 3, 4, 6, 7, 9, 10}, 0, 1 << 20, 64}};
  return s;
}

TEST(LayerGroupTest, BlockBytesPerGroup) {
  const GroupGeometry geo = GeometryOf(GptOss().layout);
  // 2 * 18 layers * 8 heads * 64 dims * 16 tokens * 2 bytes.
  EXPECT_EQ(*GroupBlockBytes(geo, GptOss().groups[0]), 589824u);
  EXPECT_EQ(*GroupBlockBytes(geo, GptOss().groups[1]), 589824u);
  EXPECT_EQ(*GroupBlockBytes(GeometryOf(MambaHybrid().layout), MambaHybrid().groups[1]),
            uint64_t{1} << 20);
  EXPECT_EQ(WindowBlocks(GptOss().groups[0], 16), 8u);
  EXPECT_EQ(WindowBlocks(GptOss().groups[0], 48), 3u);  // ceil(128 / 48)
  EXPECT_EQ(WindowBlocks(GptOss().groups[1], 16), 0u);
}

TEST(LayerGroupTest, ValidHybridsPass) {
  EXPECT_TRUE(ValidateNamespaceSpec(GptOss(), 64 << 20).ok());
  EXPECT_TRUE(ValidateNamespaceSpec(MambaHybrid(), 64 << 20).ok());
  // A pure Mamba-2 model: recurrent layers only, no attention fields.
  NamespaceSpec mamba;
  mamba.model_id = "mamba2";
  mamba.layout = KvLayout{4, 0, 0, DType::kUnspecified, 16, 0, 1};
  mamba.groups = {{GroupKind::kRecurrent, Layers(0, 4), 0, 4096, 16}};
  EXPECT_TRUE(ValidateNamespaceSpec(mamba, 64 << 20).ok()) << ValidateNamespaceSpec(mamba, 1);
}

TEST(LayerGroupTest, ValidationNamesTheGroupAndField) {
  struct Case {
    void (*mutate)(NamespaceSpec&);
    const char* expect;
  } cases[] = {
      {[](NamespaceSpec& s) {
         s.groups.clear();
         s.groups.resize(17);
       },
       "groups: 17"},
      {[](NamespaceSpec& s) { s.groups[1].layers.clear(); }, "groups[1].layers is empty"},
      {[](NamespaceSpec& s) { s.groups[1].layers.back() = 36; }, "groups[1].layers names layer 36"},
      {[](NamespaceSpec& s) { s.groups[0].layers[1] = 0; }, "groups[0].layers must be strictly"},
      {[](NamespaceSpec& s) { s.groups[1].layers[0] = 0; },
       "groups[1].layers names layer 0, already"},
      {[](NamespaceSpec& s) { s.groups[0].window_tokens = 0; }, "groups[0].window_tokens"},
      {[](NamespaceSpec& s) { s.groups[0].window_tokens = 0xffffffffu; },
       "groups[0].window_tokens is 4294967295; at most 4096 blocks"},
      {[](NamespaceSpec& s) { s.groups[0].window_tokens = 4096 * 16 + 1; },
       "groups[0].window_tokens is 65537"},
      {[](NamespaceSpec& s) { s.groups[1].window_tokens = 8; }, "groups[1].window_tokens"},
      {[](NamespaceSpec& s) { s.groups[0].state_bytes = 8; }, "groups[0].state_bytes"},
      {[](NamespaceSpec& s) { s.groups[1].kind = GroupKind::kRecurrent; },
       "groups[1].state_bytes must be > 0"},
      {[](NamespaceSpec& s) { s.groups[1].kind = static_cast<GroupKind>(9); }, "groups[1].kind"},
      {[](NamespaceSpec& s) {
         s.groups[1].kind = GroupKind::kSlidingWindow;
         s.groups[1].window_tokens = 4;
       },
       "groups[0].kind sliding_window needs a full_attention group"},
      {[](NamespaceSpec& s) { s.layout.num_kv_heads = 0; }, "layout.num_kv_heads"},
  };
  for (const Case& c : cases) {
    NamespaceSpec s = GptOss();
    c.mutate(s);
    absl::Status st = ValidateNamespaceSpec(s, 64 << 20);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.expect;
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << st << " / " << c.expect;
  }
  NamespaceSpec m = MambaHybrid();
  m.groups[1].checkpoint_tokens = 40;  // not a multiple of 16
  EXPECT_NE(ValidateNamespaceSpec(m, 64 << 20).message().find("groups[1].checkpoint_tokens"),
            std::string::npos);
  m = MambaHybrid();
  EXPECT_NE(
      ValidateNamespaceSpec(m, 512 << 10).message().find("groups[1].state_bytes make a block"),
      std::string::npos);
}

TEST(LayerGroupTest, GroupsAreInTheFingerprintAndOneFullGroupIsNoGroup) {
  NamespaceSpec plain = GptOss();
  plain.groups.clear();
  const NamespaceId plain_id = NamespaceId::Of(plain);
  // One full-attention group of every layer: the same namespace, same id.
  NamespaceSpec one = plain;
  one.groups = {{GroupKind::kFullAttention, Layers(0, 36), 0, 0, 0}};
  EXPECT_FALSE(one.hybrid());
  EXPECT_EQ(NamespaceId::Of(one), plain_id);
  // Every group field changes the id.
  const NamespaceId hybrid_id = NamespaceId::Of(GptOss());
  EXPECT_FALSE(hybrid_id == plain_id);
  void (*mutations[])(NamespaceSpec&) = {
      [](NamespaceSpec& s) { s.groups[0].window_tokens = 256; },
      [](NamespaceSpec& s) { std::swap(s.groups[0], s.groups[1]); },
      [](NamespaceSpec& s) { s.groups[1].layers.pop_back(); },
      [](NamespaceSpec& s) { s.groups[1].kind = GroupKind::kSlidingWindow; },
  };
  for (auto mutate : mutations) {
    NamespaceSpec s = GptOss();
    mutate(s);
    EXPECT_FALSE(NamespaceId::Of(s) == hybrid_id);
  }
  // A group's storage id differs from its namespace's, its siblings' and
  // the same group of another namespace.
  EXPECT_FALSE(NamespaceId::OfGroup(hybrid_id, 0) == hybrid_id);
  EXPECT_FALSE(NamespaceId::OfGroup(hybrid_id, 0) == NamespaceId::OfGroup(hybrid_id, 1));
  EXPECT_FALSE(NamespaceId::OfGroup(hybrid_id, 0) == NamespaceId::OfGroup(plain_id, 0));
  EXPECT_EQ(NamespaceId::OfGroup(hybrid_id, 1), NamespaceId::OfGroup(hybrid_id, 1));
}

}  // namespace
}  // namespace kvtier
