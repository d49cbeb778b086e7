#include "datapath/engine_layout.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kvtier {
namespace {

constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 62;

struct KindName {
  EngineLayoutKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {{EngineLayoutKind::kVllmNhd, "vllm-nhd"},
                                   {EngineLayoutKind::kVllmHnd, "vllm-hnd"},
                                   {EngineLayoutKind::kCrossLayer, "cross-layer"},
                                   {EngineLayoutKind::kSglangPageFirst, "sglang-page-first"}};

// a*b, or 0 when it passes kMaxTensorBytes.
uint64_t Mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > kMaxTensorBytes / a) return 0;
  return a * b;
}

absl::Status CheckBlocks(const EngineLayout& layout, absl::Span<void* const> tensors,
                         absl::Span<const int64_t> blocks, bool unique) {
  if (static_cast<int>(tensors.size()) != layout.num_tensors()) {
    return absl::InvalidArgumentError(absl::StrCat("layout ", EngineLayoutKindName(layout.kind()),
                                                   " has ", layout.num_tensors(), " tensors, not ",
                                                   tensors.size()));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("tensors[", i, "] is null"));
    }
  }
  absl::flat_hash_set<int64_t> seen;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i] < 0 || blocks[i] >= layout.shape().num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "blocks[", i, "] = ", blocks[i], " is outside [0, ", layout.shape().num_blocks, ")"));
    }
    if (unique && !seen.insert(blocks[i]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("blocks[", i, "] = ", blocks[i], " appears twice"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EngineLayoutKind> ParseEngineLayoutKind(absl::string_view name) {
  for (const KindName& k : kKindNames) {
    if (name == k.name) return k.kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown KV layout '", name, "' (vllm-nhd, vllm-hnd, cross-layer, sglang-page-first)"));
}

std::string EngineLayoutKindName(EngineLayoutKind kind) {
  for (const KindName& k : kKindNames) {
    if (kind == k.kind) return k.name;
  }
  return "unknown";
}

absl::StatusOr<EngineLayout> EngineLayout::Create(EngineLayoutKind kind, const KvShape& s) {
  if (s.num_layers <= 0 || s.num_blocks <= 0 || s.block_tokens <= 0 || s.kv_heads <= 0 ||
      s.head_dim <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layers, blocks, block tokens, KV heads and head dim must all be positive (got ",
        s.num_layers, ", ", s.num_blocks, ", ", s.block_tokens, ", ", s.kv_heads, ", ", s.head_dim,
        ")"));
  }
  if (s.dtype_bytes != 1 && s.dtype_bytes != 2 && s.dtype_bytes != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("element size must be 1, 2 or 4 bytes, not ", s.dtype_bytes));
  }
  // Every tensor of every layout holds 2*N*T*H*D elements times L / tensors.
  const uint64_t all =
      Mul(Mul(Mul(Mul(Mul(Mul(2, s.num_layers), s.num_blocks), s.block_tokens), s.kv_heads),
              s.head_dim),
          s.dtype_bytes);
  if (all == 0) {
    return absl::InvalidArgumentError("the KV tensors would exceed 2^62 bytes");
  }
  return EngineLayout(kind, s);
}

EngineLayout::EngineLayout(EngineLayoutKind kind, const KvShape& s) : kind_(kind), shape_(s) {
  const uint64_t tile_bytes = tile_elements() * s.dtype_bytes;
  const uint64_t n = s.num_blocks;
  switch (kind) {
    case EngineLayoutKind::kVllmNhd:
    case EngineLayoutKind::kVllmHnd:
      num_tensors_ = s.num_layers;
      chunks_per_block_ = 2 * s.num_layers;
      chunk_bytes_ = tile_bytes;
      tensor_bytes_ = 2 * n * tile_bytes;
      break;
    case EngineLayoutKind::kCrossLayer:
      num_tensors_ = 1;
      chunks_per_block_ = 1;
      chunk_bytes_ = 2 * s.num_layers * tile_bytes;
      tensor_bytes_ = n * chunk_bytes_;
      break;
    case EngineLayoutKind::kSglangPageFirst:
      num_tensors_ = 1;
      chunks_per_block_ = 2;
      chunk_bytes_ = s.num_layers * tile_bytes;
      tensor_bytes_ = 2 * n * chunk_bytes_;
      break;
  }
}

uint64_t EngineLayout::tile_elements() const {
  return uint64_t(shape_.block_tokens) * shape_.kv_heads * shape_.head_dim;
}

ChunkPlace EngineLayout::Chunk(int64_t block, int chunk) const {
  const uint64_t b = block;
  switch (kind_) {
    case EngineLayoutKind::kVllmNhd:
    case EngineLayoutKind::kVllmHnd: {
      const int kv = chunk % 2;
      return {chunk / 2, (kv * uint64_t(shape_.num_blocks) + b) * chunk_bytes_};
    }
    case EngineLayoutKind::kCrossLayer:
      return {0, b * chunk_bytes_};
    case EngineLayoutKind::kSglangPageFirst:
      return {0, (chunk * uint64_t(shape_.num_blocks) + b) * chunk_bytes_};
  }
  return {};
}

TileView EngineLayout::Tile(int layer, int kv) const {
  const uint64_t hd = uint64_t(shape_.kv_heads) * shape_.head_dim;
  const uint64_t t = shape_.block_tokens;
  const uint64_t d = shape_.head_dim;
  switch (kind_) {
    case EngineLayoutKind::kVllmNhd:
    case EngineLayoutKind::kCrossLayer:
      return {(2 * uint64_t(layer) + kv) * tile_elements(), hd, d};
    case EngineLayoutKind::kVllmHnd:
      return {(2 * uint64_t(layer) + kv) * tile_elements(), d, t * d};
    case EngineLayoutKind::kSglangPageFirst:
      return {kv * t * shape_.num_layers * hd + layer * hd, shape_.num_layers * hd, d};
  }
  return {};
}

absl::StatusOr<std::vector<CopyOp>> PlanGather(const EngineLayout& layout,
                                               absl::Span<void* const> tensors,
                                               absl::Span<const int64_t> blocks, void* dst) {
  RETURN_IF_ERROR(CheckBlocks(layout, tensors, blocks, false));
  if (dst == nullptr && !blocks.empty()) return absl::InvalidArgumentError("dst is null");
  std::vector<CopyOp> ops;
  ops.reserve(blocks.size() * layout.chunks_per_block());
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b : blocks) {
    for (int c = 0; c < layout.chunks_per_block(); ++c) {
      const ChunkPlace p = layout.Chunk(b, c);
      ops.push_back(
          {out, static_cast<const uint8_t*>(tensors[p.tensor]) + p.offset, layout.chunk_bytes()});
      out += layout.chunk_bytes();
    }
  }
  return ops;
}

absl::StatusOr<std::vector<CopyOp>> PlanScatter(const EngineLayout& layout,
                                                absl::Span<void* const> tensors,
                                                absl::Span<const int64_t> blocks, const void* src) {
  RETURN_IF_ERROR(CheckBlocks(layout, tensors, blocks, true));
  if (src == nullptr && !blocks.empty()) return absl::InvalidArgumentError("src is null");
  std::vector<CopyOp> ops;
  ops.reserve(blocks.size() * layout.chunks_per_block());
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t b : blocks) {
    for (int c = 0; c < layout.chunks_per_block(); ++c) {
      const ChunkPlace p = layout.Chunk(b, c);
      ops.push_back(
          {static_cast<uint8_t*>(tensors[p.tensor]) + p.offset, in, layout.chunk_bytes()});
      in += layout.chunk_bytes();
    }
  }
  return ops;
}

}  // namespace kvtier
