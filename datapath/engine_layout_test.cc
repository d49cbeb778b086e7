#include "datapath/engine_layout.h"

#include <gtest/gtest.h>

#include <vector>

#include "datapath/cpu_copy_engine.h"

namespace kvtier {
namespace {

constexpr int L = 3, T = 4, H = 2, D = 5;
constexpr int64_t N = 7;

uint32_t Code(int l, int kv, int64_t b, int t, int h, int d) {
  return ((((static_cast<uint32_t>(l) * 2 + kv) * 64 + b) * 16 + t) * 8 + h) * 16 + d + 1;
}

// Element index of (l, kv, b, t, h, d) in tensor `*tensor`, from the shapes in
// engine_layout.h, written independently of engine_layout.cc.
uint64_t Index(EngineLayoutKind kind, int l, int kv, int64_t b, int t, int h, int d, int* tensor) {
  switch (kind) {
    case EngineLayoutKind::kVllmNhd:
      *tensor = l;
      return ((uint64_t(kv) * N + b) * T + t) * H * D + h * D + d;
    case EngineLayoutKind::kVllmHnd:
      *tensor = l;
      return ((uint64_t(kv) * N + b) * H + h) * T * D + t * D + d;
    case EngineLayoutKind::kCrossLayer:
      *tensor = 0;
      return ((((uint64_t(b) * L + l) * 2 + kv) * T + t) * H + h) * D + d;
    case EngineLayoutKind::kSglangPageFirst:
      *tensor = 0;
      return (((uint64_t(kv) * N * T + b * T + t) * L + l) * H + h) * D + d;
  }
  return 0;
}

class EngineLayoutTest : public ::testing::TestWithParam<EngineLayoutKind> {};

TEST_P(EngineLayoutTest, GatherAndScatterFollowTheShape) {
  const EngineLayoutKind kind = GetParam();
  absl::StatusOr<EngineLayout> layout = EngineLayout::Create(kind, {L, N, T, H, D, 4});
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->block_bytes(), uint64_t(2) * L * T * H * D * 4);
  std::vector<std::vector<uint32_t>> tensors(layout->num_tensors(),
                                             std::vector<uint32_t>(layout->tensor_bytes() / 4));
  for (int l = 0; l < L; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      for (int64_t b = 0; b < N; ++b) {
        for (int t = 0; t < T; ++t) {
          for (int h = 0; h < H; ++h) {
            for (int d = 0; d < D; ++d) {
              int tensor = 0;
              const uint64_t i = Index(kind, l, kv, b, t, h, d, &tensor);
              ASSERT_LT(i, tensors[tensor].size());
              tensors[tensor][i] = Code(l, kv, b, t, h, d);
            }
          }
        }
      }
    }
  }
  std::vector<void*> bases;
  for (auto& t : tensors) bases.push_back(t.data());
  const std::vector<int64_t> blocks = {3, 0, 6};
  std::vector<uint32_t> gathered(blocks.size() * layout->block_bytes() / 4);
  absl::StatusOr<std::vector<CopyOp>> ops = PlanGather(*layout, bases, blocks, gathered.data());
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_EQ(ops->size(), blocks.size() * layout->chunks_per_block());
  auto engine = CpuCopyEngine::Create(2);
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->CopySync({MemoryKind::kHost, MemoryKind::kHost, 0, *ops}).ok());
  const uint64_t block_elems = layout->block_bytes() / 4;
  for (size_t i = 0; i < blocks.size(); ++i) {
    for (int l = 0; l < L; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        const TileView tile = layout->Tile(l, kv);
        for (int t = 0; t < T; ++t) {
          for (int h = 0; h < H; ++h) {
            for (int d = 0; d < D; ++d) {
              const uint64_t at =
                  i * block_elems + tile.offset + t * tile.token_stride + h * tile.head_stride + d;
              ASSERT_EQ(gathered[at], Code(l, kv, blocks[i], t, h, d))
                  << "block " << blocks[i] << " l" << l << " kv" << kv << " t" << t;
            }
          }
        }
      }
    }
  }
  // Scatter the gathered blocks into empty tensors at other block ids.
  std::vector<std::vector<uint32_t>> out(tensors.size(),
                                         std::vector<uint32_t>(tensors[0].size(), 0));
  std::vector<void*> out_bases;
  for (auto& t : out) out_bases.push_back(t.data());
  const std::vector<int64_t> targets = {1, 5, 2};
  ops = PlanScatter(*layout, out_bases, targets, gathered.data());
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_TRUE((*engine)->CopySync({MemoryKind::kHost, MemoryKind::kHost, 0, *ops}).ok());
  for (int l = 0; l < L; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      for (int64_t b = 0; b < N; ++b) {
        int source = -1;
        for (size_t i = 0; i < targets.size(); ++i) {
          if (targets[i] == b) source = static_cast<int>(blocks[i]);
        }
        for (int t = 0; t < T; ++t) {
          for (int h = 0; h < H; ++h) {
            for (int d = 0; d < D; ++d) {
              int tensor = 0;
              const uint64_t at = Index(kind, l, kv, b, t, h, d, &tensor);
              ASSERT_EQ(out[tensor][at], source < 0 ? 0 : Code(l, kv, source, t, h, d))
                  << "block " << b;
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, EngineLayoutTest,
                         ::testing::Values(EngineLayoutKind::kVllmNhd, EngineLayoutKind::kVllmHnd,
                                           EngineLayoutKind::kCrossLayer,
                                           EngineLayoutKind::kSglangPageFirst),
                         [](const auto& info) {
                           std::string name = EngineLayoutKindName(info.param);
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

TEST(EngineLayoutTest, ChunkSizesMatchTheEngines) {
  // Llama-3.1-8B in vLLM: 32 layers, 16-token blocks, 8 KV heads of 128, bf16:
  // 64 chunks of 32 KiB per block.
  absl::StatusOr<EngineLayout> vllm =
      EngineLayout::Create(EngineLayoutKind::kVllmNhd, {32, 1000, 16, 8, 128, 2});
  ASSERT_TRUE(vllm.ok());
  EXPECT_EQ(vllm->chunks_per_block(), 64);
  EXPECT_EQ(vllm->chunk_bytes(), 32u * 1024);
  EXPECT_EQ(vllm->block_bytes(), 2u * 1024 * 1024);
  absl::StatusOr<EngineLayout> cross =
      EngineLayout::Create(EngineLayoutKind::kCrossLayer, {32, 1000, 16, 8, 128, 2});
  ASSERT_TRUE(cross.ok());
  EXPECT_EQ(cross->chunks_per_block(), 1);
  EXPECT_EQ(cross->block_bytes(), vllm->block_bytes());
}

TEST(EngineLayoutTest, BadShapesAndRequestsAreInvalidArgument) {
  EXPECT_EQ(EngineLayout::Create(EngineLayoutKind::kVllmNhd, {0, 1, 1, 1, 1, 2}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EngineLayout::Create(EngineLayoutKind::kVllmNhd, {1, 1, 1, 1, 1, 3}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EngineLayout::Create(EngineLayoutKind::kCrossLayer,
                                 {1 << 20, int64_t{1} << 40, 1 << 10, 64, 128, 4})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseEngineLayoutKind("vllm").status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(ParseEngineLayoutKind("sglang-page-first").ok());

  absl::StatusOr<EngineLayout> layout =
      EngineLayout::Create(EngineLayoutKind::kVllmNhd, {2, 4, 2, 1, 2, 2});
  ASSERT_TRUE(layout.ok());
  std::vector<uint8_t> t0(layout->tensor_bytes()), t1(layout->tensor_bytes()),
      buf(4 * layout->block_bytes());
  std::vector<void*> two = {t0.data(), t1.data()}, one = {t0.data()},
                     with_null = {t0.data(), nullptr};
  const std::vector<int64_t> ok_blocks = {0, 3};
  EXPECT_TRUE(PlanGather(*layout, two, ok_blocks, buf.data()).ok());
  EXPECT_EQ(PlanGather(*layout, one, ok_blocks, buf.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanGather(*layout, with_null, ok_blocks, buf.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<int64_t> out_of_range = {4}, negative = {-1}, repeated = {1, 1};
  EXPECT_EQ(PlanGather(*layout, two, out_of_range, buf.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanScatter(*layout, two, negative, buf.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Gathering a block twice is fine; scattering two blocks onto one is not.
  EXPECT_TRUE(PlanGather(*layout, two, repeated, buf.data()).ok());
  EXPECT_EQ(PlanScatter(*layout, two, repeated, buf.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvtier
