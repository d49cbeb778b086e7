#include "storage/namespace_spec.h"

#include <gtest/gtest.h>

namespace kvtier {
namespace {

NamespaceSpec Llama8b() {
  NamespaceSpec s;
  s.model_id = "meta-llama/Llama-3.1-8B";
  s.layout = KvLayout{32, 8, 128, DType::kBf16, 16, 0, 1};
  return s;
}

TEST(NamespaceSpecTest, BlockBytesOfLlama8b) {
  // 2 (K,V) * 32 layers * 8 KV heads * 128 dims * 16 tokens * 2 bytes.
  EXPECT_EQ(*BlockBytes(Llama8b().layout), 2097152u);
}

TEST(NamespaceSpecTest, LatentBlockIsOneVectorPerTokenAndLayer) {
  // DeepSeek-V3's MLA cache: 61 layers * 1 latent of 512 + 64 dims * 64
  // tokens * 2 bytes, no V.
  NamespaceSpec s;
  s.model_id = "deepseek-ai/DeepSeek-V3";
  s.layout = KvLayout{61, 1, 576, DType::kBf16, 64, 0, 1, /*latent=*/true};
  EXPECT_EQ(*BlockBytes(s.layout), 4497408u);
  EXPECT_TRUE(ValidateNamespaceSpec(s, 64 << 20).ok());
  s.layout.latent = false;
  EXPECT_EQ(*BlockBytes(s.layout), 2 * 4497408u);
}

TEST(NamespaceSpecTest, BlockBytesOverflowIsAnError) {
  KvLayout l{0xffffffff, 0xffffffff, 0xffffffff, DType::kFp32, 0xffffffff, 0, 1};
  EXPECT_EQ(BlockBytes(l).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NamespaceSpecTest, ValidationNamesTheField) {
  const uint64_t kMax = 64 << 20;
  EXPECT_TRUE(ValidateNamespaceSpec(Llama8b(), kMax).ok());
  struct Case {
    void (*mutate)(NamespaceSpec&);
    const char* expect;
  } cases[] = {
      {[](NamespaceSpec& s) { s.model_id.clear(); }, "model_id"},
      {[](NamespaceSpec& s) { s.model_id.assign(257, 'm'); }, "model_id"},
      {[](NamespaceSpec& s) { s.salt.assign(257, 's'); }, "salt"},
      {[](NamespaceSpec& s) { s.layout.num_layers = 0; }, "num_layers"},
      {[](NamespaceSpec& s) { s.layout.num_kv_heads = 0; }, "num_kv_heads"},
      {[](NamespaceSpec& s) { s.layout.head_dim = 0; }, "head_dim"},
      {[](NamespaceSpec& s) { s.layout.dtype = DType::kUnspecified; }, "dtype"},
      {[](NamespaceSpec& s) { s.layout.tokens_per_block = 0; }, "tokens_per_block"},
      {[](NamespaceSpec& s) { s.layout.tp_rank = 1; }, "tp_rank"},
      {[](NamespaceSpec& s) { s.layout.tokens_per_block = 1024; }, "max_block_bytes"},
      {[](NamespaceSpec& s) { s.layout.latent = true; }, "num_kv_heads must be 1"},
      {[](NamespaceSpec& s) {
         s.layout.latent = true;
         s.layout.num_kv_heads = 1;
         s.groups = {
             LayerGroup{.kind = GroupKind::kSlidingWindow, .layers = {0}, .window_tokens = 16},
             LayerGroup{.kind = GroupKind::kFullAttention, .layers = {1}}};
       },
       "layer groups"},
  };
  for (const Case& c : cases) {
    NamespaceSpec s = Llama8b();
    c.mutate(s);
    absl::Status st = ValidateNamespaceSpec(s, kMax);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.expect;
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << st;
  }
}

TEST(NamespaceSpecTest, FingerprintCoversEveryField) {
  const NamespaceId base = NamespaceId::Of(Llama8b());
  EXPECT_EQ(NamespaceId::Of(Llama8b()), base);
  void (*mutations[])(NamespaceSpec&) = {
      [](NamespaceSpec& s) { s.model_id = "meta-llama/Llama-3.1-70B"; },
      [](NamespaceSpec& s) { s.salt = "tenant-a"; },
      [](NamespaceSpec& s) { s.layout.num_layers++; },
      [](NamespaceSpec& s) { s.layout.num_kv_heads++; },
      [](NamespaceSpec& s) { s.layout.head_dim++; },
      [](NamespaceSpec& s) { s.layout.dtype = DType::kFp16; },
      [](NamespaceSpec& s) { s.layout.tokens_per_block++; },
      [](NamespaceSpec& s) { s.layout.tp_size = 2; },
      [](NamespaceSpec& s) {
        s.layout.tp_size = 2;
        s.layout.tp_rank = 1;
      },
      [](NamespaceSpec& s) { s.encoding = "fp8-e4m3/vllm-nhd/g16"; },
      [](NamespaceSpec& s) { s.tenant = "alpha"; },
  };
  for (auto m : mutations) {
    NamespaceSpec s = Llama8b();
    m(s);
    EXPECT_FALSE(NamespaceId::Of(s) == base);
  }
  // A latent layout is another namespace than the same fields with K and V.
  NamespaceSpec kv = Llama8b();
  kv.layout.num_kv_heads = 1;
  NamespaceSpec latent = kv;
  latent.layout.latent = true;
  EXPECT_FALSE(NamespaceId::Of(kv) == NamespaceId::Of(latent));
  // Field boundaries are length-prefixed: moving bytes between the model id
  // and the salt changes the id.
  const NamespaceSpec a{"ab", Llama8b().layout, "c", "", "", {}};
  const NamespaceSpec b{"a", Llama8b().layout, "bc", "", "", {}};
  EXPECT_FALSE(NamespaceId::Of(a) == NamespaceId::Of(b));
  // A tenant is not a salt: the server's binding cannot be forged by a
  // client choosing a salt.
  NamespaceSpec salted = Llama8b(), bound = Llama8b();
  salted.salt = "tenant=alpha";
  bound.tenant = "alpha";
  EXPECT_FALSE(NamespaceId::Of(salted) == NamespaceId::Of(bound));
}

TEST(NamespaceSpecTest, TpSizeZeroReadsAsOne) {
  NamespaceSpec a = Llama8b(), b = Llama8b();
  a.layout.tp_size = 0;
  EXPECT_EQ(NamespaceId::Of(a), NamespaceId::Of(b));
}

TEST(NamespaceSpecTest, HexRoundTrip) {
  const NamespaceId id = NamespaceId::Of(Llama8b());
  const std::string hex = id.ToHex();
  EXPECT_EQ(hex.size(), 32u);
  EXPECT_EQ(*NamespaceId::FromHex(hex), id);
  EXPECT_FALSE(NamespaceId::FromHex(hex.substr(1)).ok());
  EXPECT_FALSE(NamespaceId::FromHex(std::string(32, 'g')).ok());
}

}  // namespace
}  // namespace kvtier
