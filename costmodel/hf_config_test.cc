#include "costmodel/hf_config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "costmodel/test_models.h"
#include "gtest/gtest.h"

namespace kvtier::costmodel {
namespace {

TEST(HfConfigTest, GqaConfigMatchesCatalogShape) {
  const ModelSpec m = TestConfig("gqa_llama.json");
  EXPECT_EQ(m.num_layers, 32u);
  EXPECT_EQ(m.num_kv_heads, 8u);
  EXPECT_EQ(m.head_dim, 128u);  // hidden / heads: the file has no head_dim
  EXPECT_FALSE(m.mla.has_value());
  EXPECT_TRUE(m.groups.empty());
  EXPECT_DOUBLE_EQ(m.Parameters().total, CatalogModel("llama-3.1-8b")->Parameters().total);
}

TEST(HfConfigTest, MlaMoeConfig) {
  const ModelSpec m = TestConfig("mla_deepseek.json");
  ASSERT_TRUE(m.mla.has_value());
  EXPECT_EQ(m.mla->kv_lora_rank, 512u);
  EXPECT_EQ(m.mla->qk_rope_head_dim, 64u);
  ASSERT_TRUE(m.moe.has_value());
  EXPECT_EQ(m.moe->routed_experts, 256u);
  EXPECT_EQ(m.moe->first_dense_layers, 3u);
  EXPECT_NEAR(m.Parameters().total / 671e9, 1, 0.015);
  EXPECT_NEAR(m.Parameters().active / 37e9, 1, 0.015);
  EXPECT_EQ(m.weight_bytes_per_param, 1);  // quantization_config: fp8
}

TEST(HfConfigTest, SlidingWindowLayerTypesBecomeGroups) {
  const ModelSpec m = TestConfig("sliding_gptoss.json");
  ASSERT_EQ(m.groups.size(), 2u);
  EXPECT_EQ(m.groups[0].kind, LayerKind::kSlidingWindow);
  EXPECT_EQ(m.groups[0].layers, 18u);
  EXPECT_EQ(m.groups[0].window, 128u);
  EXPECT_EQ(m.groups[1].kind, LayerKind::kFullAttention);
  EXPECT_EQ(m.groups[1].layers, 18u);
  ASSERT_TRUE(m.moe.has_value());
  EXPECT_EQ(m.moe->expert_intermediate_size, 2880u);  // falls back to intermediate_size
}

TEST(HfConfigTest, RecurrentHybrid) {
  const ModelSpec m = TestConfig("recurrent_hybrid.json");
  EXPECT_EQ(m.LayersOf(LayerKind::kRecurrent), 6u);
  EXPECT_EQ(m.LayersOf(LayerKind::kFullAttention), 2u);
  ASSERT_TRUE(m.recurrent.has_value());
  EXPECT_EQ(m.recurrent->heads, 32u);
  EXPECT_EQ(m.recurrent->head_dim, 64u);
  EXPECT_EQ(m.recurrent->state_size, 128u);
  EXPECT_EQ(m.recurrent->conv_kernel, 4u);
  EXPECT_EQ(m.recurrent->groups, 1u);
}

TEST(HfConfigTest, MistralStyleWindowAppliesToAllLayersUnlessDisabled) {
  auto config = [](absl::string_view extra) {
    return absl::StrCat(R"({"num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
          "intermediate_size": 128, "vocab_size": 100, "sliding_window": 32 )",
                        extra, "}");
  };
  absl::StatusOr<ModelSpec> on = ModelSpecFromHfConfig(config(""), "m");
  ASSERT_TRUE(on.ok()) << on.status();
  ASSERT_EQ(on->groups.size(), 1u);
  EXPECT_EQ(on->groups[0].kind, LayerKind::kSlidingWindow);
  absl::StatusOr<ModelSpec> off =
      ModelSpecFromHfConfig(config(R"(, "use_sliding_window": false)"), "m");
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(off->groups.empty());
  // Missing optional fields take their defaults: KV heads = heads, head_dim =
  // hidden / heads, untied, bf16.
  EXPECT_EQ(off->num_kv_heads, 4u);
  EXPECT_EQ(off->head_dim, 16u);
  EXPECT_FALSE(off->tie_word_embeddings);
  EXPECT_EQ(off->weight_bytes_per_param, 2);
}

TEST(HfConfigTest, MultimodalTextConfig) {
  absl::StatusOr<ModelSpec> m = ModelSpecFromHfConfig(
      R"({"model_type": "mllama", "text_config": {"num_hidden_layers": 2, "hidden_size": 64,
          "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}})",
      "mm");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->num_layers, 2u);
}

void ExpectError(const std::string& json, const std::string& needle) {
  absl::StatusOr<ModelSpec> m = ModelSpecFromHfConfig(json, "bad");
  ASSERT_FALSE(m.ok()) << json;
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status();
}

TEST(HfConfigTest, BadConfigsNameTheField) {
  const std::string ok_tail =
      R"("hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100)";
  ExpectError("{not json", "not valid JSON");
  ExpectError("[1, 2]", "JSON object");
  ExpectError("{" + ok_tail + "}", "missing required field 'num_hidden_layers'");
  ExpectError(R"({"num_hidden_layers": "32", )" + ok_tail + "}", "'num_hidden_layers'");
  ExpectError(R"({"num_hidden_layers": -1, )" + ok_tail + "}", "non-negative integer");
  ExpectError(R"({"num_hidden_layers": 2, "tie_word_embeddings": "yes", )" + ok_tail + "}",
              "'tie_word_embeddings'");
  ExpectError(R"({"num_hidden_layers": 2, "torch_dtype": "int3", )" + ok_tail + "}", "torch_dtype");
  ExpectError(R"({"num_hidden_layers": 2, "num_key_value_heads": 3, )" + ok_tail + "}",
              "not a multiple");
  ExpectError(R"({"num_hidden_layers": 2, "layer_types": ["attention"], )" + ok_tail + "}",
              "layer_types lists 1 layers");
  ExpectError(R"({"num_hidden_layers": 1, "layer_types": ["weird"], )" + ok_tail + "}",
              "layer type 'weird'");
  ExpectError(R"({"num_hidden_layers": 1, "layer_types": ["mamba"], )" + ok_tail + "}",
              "recurrent layers need");
  ExpectError(R"({"num_hidden_layers": 1, "layer_types": "mamba", )" + ok_tail + "}",
              "list of strings");
  ExpectError(
      R"({"num_hidden_layers": 2, "num_experts": 8, "num_experts_per_tok": 9, )" + ok_tail + "}",
      "num_experts_per_tok");
  EXPECT_EQ(ModelSpecFromHfConfigFile("/nonexistent/config.json").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kvtier::costmodel
