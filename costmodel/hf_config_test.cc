#include "costmodel/hf_config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "costmodel/kv_footprint.h"
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

// google/gemma-3-4b-it: text_config inside a multimodal config, five local
// layers per global one.
TEST(HfConfigTest, Gemma3SlidingWindowPattern) {
  const ModelSpec m = TestConfig("gemma3_multimodal.json");
  EXPECT_EQ(m.num_layers, 34u);
  // Layer i is global when (i + 1) % 6 == 0: layers 5, 11, 17, 23, 29.
  ASSERT_EQ(m.groups.size(), 2u);
  EXPECT_EQ(m.groups[0].kind, LayerKind::kSlidingWindow);
  EXPECT_EQ(m.groups[0].layers, 29u);
  EXPECT_EQ(m.groups[0].window, 1024u);
  EXPECT_EQ(m.groups[1].kind, LayerKind::kFullAttention);
  EXPECT_EQ(m.groups[1].layers, 5u);
  EXPECT_EQ(m.head_dim, 256u);
  EXPECT_EQ(m.num_kv_heads, 4u);
  // KV per layer and token: 2 * 4 heads * 256 * 2 bytes = 4,096; 34 layers =
  // 139,264. At 8,192 tokens: 5 * 4,096 * 8,192 + 29 * 4,096 * 1,024 =
  // 167,772,160 + 121,634,816 = 289,406,976.
  const Deployment d = Deploy(m, ToyGpu());
  EXPECT_EQ(ComputeKvFootprint(d).bytes_per_token, 139264.0);
  EXPECT_EQ(KvBytesPerGpuAtContext(d, 8192), 289406976.0);
  EXPECT_EQ(PlanState(d, 256, 8192).state_bytes_per_request, 0.0);
}

// Qwen/Qwen3-Next-80B-A3B: full attention every 4th layer, gated delta net
// elsewhere.
TEST(HfConfigTest, Qwen3NextLinearAttention) {
  const ModelSpec m = TestConfig("qwen3_next.json");
  ASSERT_EQ(m.groups.size(), 2u);
  EXPECT_EQ(m.groups[0].kind, LayerKind::kRecurrent);
  EXPECT_EQ(m.groups[0].layers, 36u);
  EXPECT_EQ(m.groups[1].kind, LayerKind::kFullAttention);
  EXPECT_EQ(m.groups[1].layers, 12u);
  ASSERT_TRUE(m.recurrent.has_value());
  EXPECT_EQ(m.recurrent->mixer, RecurrentMixer::kGatedDeltaNet);
  EXPECT_EQ(m.recurrent->heads, 32u);        // linear_num_value_heads
  EXPECT_EQ(m.recurrent->head_dim, 128u);    // linear_value_head_dim
  EXPECT_EQ(m.recurrent->state_size, 128u);  // linear_key_head_dim
  EXPECT_EQ(m.recurrent->groups, 16u);       // linear_num_key_heads
  EXPECT_EQ(m.recurrent->conv_kernel, 4u);
  // State per layer: 32 * 128 * 128 * 2 bytes = 1,048,576; conv (4 - 1) *
  // (2 * 16 * 128 + 32 * 128) * 2 = 49,152; 36 layers: 39,518,208.
  // KV per token: 12 layers * 2 * 2 heads * 256 * 2 bytes = 24,576.
  const Deployment d = Deploy(m, ToyGpu());
  const StatePlan p = PlanState(d, 256, 0);
  EXPECT_EQ(p.ssm_state_bytes_per_layer, 1048576.0);
  EXPECT_EQ(p.conv_state_bytes_per_layer, 49152.0);
  EXPECT_EQ(p.state_bytes_per_request, 39518208.0);
  EXPECT_EQ(ComputeKvFootprint(d).bytes_per_token, 24576.0);
}

// nvidia/Nemotron-H-8B-Base-8K: one letter per layer.
TEST(HfConfigTest, NemotronHybridOverridePattern) {
  const ModelSpec m = TestConfig("nemotron_h.json");
  EXPECT_EQ(m.LayersOf(LayerKind::kRecurrent), 24u);
  EXPECT_EQ(m.LayersOf(LayerKind::kFullAttention), 4u);
  EXPECT_EQ(m.LayersOf(LayerKind::kMlpOnly), 24u);
  EXPECT_EQ(m.head_dim, 128u);  // attention_head_dim
  EXPECT_TRUE(m.separate_mlp_layers);
  EXPECT_FALSE(m.gated_mlp);
  ASSERT_TRUE(m.recurrent.has_value());
  EXPECT_EQ(m.recurrent->mixer, RecurrentMixer::kMamba2);
  // SSM 128 heads * 64 * 128 * 2 bytes = 2,097,152; conv (4 - 1) * (8,192 +
  // 2 * 8 * 128) * 2 = 61,440; 24 layers: 51,806,208. KV per token: 4 * 2 *
  // 8 * 128 * 2 = 16,384.
  const Deployment d = Deploy(m, ToyGpu());
  const StatePlan p = PlanState(d, 256, 0);
  EXPECT_EQ(p.ssm_state_bytes_per_layer, 2097152.0);
  EXPECT_EQ(p.conv_state_bytes_per_layer, 61440.0);
  EXPECT_EQ(p.state_bytes_per_request, 51806208.0);
  const KvFootprint f = ComputeKvFootprint(d);
  EXPECT_EQ(f.bytes_per_token, 16384.0);
  for (const GroupFootprint& g : f.groups) {
    if (g.group.kind == LayerKind::kMlpOnly) {
      EXPECT_EQ(g.bytes_per_token_per_gpu, 0.0);
    }
  }
}

// ai21labs/Jamba-v0.1: attention at layers 4, 12, 20, 28; Mamba v1 elsewhere;
// MoE every second layer.
TEST(HfConfigTest, JambaAttentionPeriodAndMambaV1) {
  const ModelSpec m = TestConfig("jamba.json");
  ASSERT_EQ(m.groups.size(), 2u);
  EXPECT_EQ(m.groups[0].kind, LayerKind::kRecurrent);
  EXPECT_EQ(m.groups[0].layers, 28u);
  EXPECT_EQ(m.groups[1].kind, LayerKind::kFullAttention);
  EXPECT_EQ(m.groups[1].layers, 4u);
  ASSERT_TRUE(m.recurrent.has_value());
  EXPECT_EQ(m.recurrent->mixer, RecurrentMixer::kMamba1);
  EXPECT_EQ(m.recurrent->heads, 8192u);  // d_inner = 2 * 4,096
  EXPECT_EQ(m.recurrent->dt_rank, 256u);
  // SSM d_inner * d_state * 2 bytes = 8,192 * 16 * 2 = 262,144; conv
  // d_inner * (d_conv - 1) * 2 = 49,152; 28 layers: 8,716,288.
  const Deployment d = Deploy(m, ToyGpu());
  const StatePlan p = PlanState(d, 256, 0);
  EXPECT_EQ(p.ssm_state_bytes_per_layer, 262144.0);
  EXPECT_EQ(p.conv_state_bytes_per_layer, 49152.0);
  EXPECT_EQ(p.state_bytes_per_request, 8716288.0);
  EXPECT_EQ(ComputeKvFootprint(d).bytes_per_token, 16384.0);  // 4 * 2 * 8 * 128 * 2
  // Mamba layer 105,291,776 (docs/planner.md); 16 MoE layers of 16 experts
  // (2,818,637,824 with router), 16 dense (176,160,768), 4 attention
  // (41,943,040), norms 266,240, embedding + head 536,870,912: 51,569,856,512
  // total (published 52 B); active 11,841,409,024 (published 12 B).
  EXPECT_DOUBLE_EQ(m.Parameters().total, 51569856512.0);
  EXPECT_DOUBLE_EQ(m.Parameters().active, 11841409024.0);
}

// mistralai/Mamba-Codestral-7B-v0.1: Mamba2Config, no attention at all.
TEST(HfConfigTest, PureMamba2HasNoAttentionLayers) {
  const ModelSpec m = TestConfig("mamba2_codestral.json");
  EXPECT_EQ(m.num_layers, 64u);
  EXPECT_EQ(m.AttentionLayers(), 0u);
  EXPECT_EQ(m.LayersOf(LayerKind::kRecurrent), 64u);
  EXPECT_EQ(m.intermediate_size, 0u);  // the file's 8,192 is the Mamba width
  ASSERT_TRUE(m.recurrent.has_value());
  EXPECT_EQ(m.recurrent->heads, 128u);
  EXPECT_EQ(m.recurrent->head_dim, 64u);
  EXPECT_EQ(m.recurrent->groups, 8u);
  // SSM 128 * 64 * 128 * 2 = 2,097,152; conv 3 * (8,192 + 2 * 8 * 128) * 2 =
  // 61,440; 64 layers: 138,149,888. No KV.
  const Deployment d = Deploy(m, ToyGpu());
  EXPECT_EQ(PlanState(d, 256, 0).state_bytes_per_request, 138149888.0);
  EXPECT_EQ(ComputeKvFootprint(d).bytes_per_token, 0.0);
  EXPECT_EQ(KvBytesPerGpuAtContext(d, 100000), 138149888.0);
  // Mixer 4,096 * (2 * 8,192 + 2,048 + 128) + 10,240 * 4 + 3 * 128 + 8,192 +
  // 8,192 * 4,096 = 109,625,728 per layer; * 64 + norms 64 * 4,096 + 4,096 +
  // embedding and head 2 * 32,768 * 4,096 = 7,284,748,288 (about 7.3 B).
  EXPECT_DOUBLE_EQ(m.Parameters().total, 7284748288.0);
}

TEST(HfConfigTest, BadHybridConfigsNameTheField) {
  const std::string tail =
      R"("hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100)";
  ExpectError(
      R"({"num_hidden_layers": 6, "sliding_window": 8, "sliding_window_pattern": 0, )" + tail + "}",
      "'sliding_window_pattern' must be > 0");
  ExpectError(R"({"num_hidden_layers": 6, "sliding_window_pattern": 3, )" + tail + "}",
              "sliding_window > 0");
  ExpectError(R"({"num_hidden_layers": 4, "full_attention_interval": 0, )" + tail + "}",
              "'full_attention_interval' must be > 0");
  const std::string linear =
      R"("full_attention_interval": 2, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
         "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4, )";
  ExpectError(R"({"num_hidden_layers": 4, )" + linear + tail + "}",
              "missing required field 'linear_key_head_dim'");
  ExpectError(R"({"num_hidden_layers": 4, "linear_key_head_dim": 0, )" + linear + tail + "}",
              "'linear_key_head_dim' must be > 0");
  ExpectError(R"({"num_hidden_layers": 4, "linear_key_head_dim": 8, "linear_num_key_heads": 3,
                  "full_attention_interval": 2, "linear_num_value_heads": 4,
                  "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4, )" +
                  tail + "}",
              "linear_num_value_heads (4) is not a multiple of linear_num_key_heads (3)");
  const std::string mamba =
      R"("mamba_num_heads": 4, "mamba_head_dim": 32, "ssm_state_size": 16, "n_groups": 1,
         "conv_kernel": 4, )";
  ExpectError(R"({"num_hidden_layers": 3, "hybrid_override_pattern": "M*E", )" + mamba + tail + "}",
              "hybrid_override_pattern: layer 2 is 'E'");
  ExpectError(R"({"num_hidden_layers": 4, "hybrid_override_pattern": "M*-", )" + mamba + tail + "}",
              "hybrid_override_pattern has 3 layers, num_hidden_layers is 4");
  ExpectError(R"({"num_hidden_layers": 3, "hybrid_override_pattern": 7, )" + mamba + tail + "}",
              "'hybrid_override_pattern' must be a string");
  ExpectError(R"({"num_hidden_layers": 3, "hybrid_override_pattern": "M*-", "expand": 3, )" +
                  mamba + tail + "}",
              "'expand' (3) * hidden_size (64) is not heads * head_dim (128)");
  const std::string jamba = R"("mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, )";
  ExpectError(R"({"num_hidden_layers": 4, "attn_layer_period": 2, )" + jamba + tail + "}",
              "missing required field 'attn_layer_offset'");
  ExpectError(R"({"num_hidden_layers": 4, "attn_layer_period": 2, "attn_layer_offset": 2, )" +
                  jamba + tail + "}",
              "attn_layer_offset (2) must be < attn_layer_period (2)");
  ExpectError(R"({"num_hidden_layers": 4, "attn_layer_period": 0, )" + jamba + tail + "}",
              "'attn_layer_period' must be > 0");
  ExpectError(R"({"num_hidden_layers": 4, "attn_layer_period": 2, "attn_layer_offset": 1,
                  "mamba_d_conv": 4, "mamba_expand": 2, )" +
                  tail + "}",
              "missing required field 'mamba_d_state'");
  ExpectError(R"({"num_hidden_layers": 4, "num_experts": 4, "num_experts_per_tok": 2,
                  "expert_layer_period": 2, "expert_layer_offset": 2, )" +
                  tail + "}",
              "expert_layer_offset must be < expert_layer_period");
  const std::string mamba2 =
      R"({"model_type": "mamba2", "num_hidden_layers": 2, "hidden_size": 64, "vocab_size": 100,
          "head_dim": 16, "state_size": 8, "conv_kernel": 4)";
  ExpectError(mamba2 + R"(, "n_groups": 1})", "missing required field 'num_heads'");
  ExpectError(mamba2 + R"(, "n_groups": 1, "num_heads": 8, "expand": 1.5})",
              "'expand' (1.5) * hidden_size (64) is not heads * head_dim (128)");
  ExpectError(mamba2 + R"(, "num_heads": 8, "n_groups": 3})",
              "num_heads (8) is not a multiple of n_groups (3)");
  absl::StatusOr<ModelSpec> ok =
      ModelSpecFromHfConfig(mamba2 + R"(, "n_groups": 1, "num_heads": 8, "expand": 2})", "m2");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->AttentionLayers(), 0u);
}

}  // namespace
}  // namespace kvtier::costmodel
