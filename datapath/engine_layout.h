// EngineLayout: how an engine lays out its paged KV cache in memory, described
// by strides, and where each block's chunks lie. The daemon stores a block
// contiguously: its chunks concatenated in chunk order (the "block format").
// Gathering copies a block's chunks out of the engine's tensors into that
// format; scattering copies them back. Both are planned here as one CopyBatch
// of chunk copies, so a CopyEngine moves a whole batch of blocks with one
// completion (and, on CUDA, one kernel launch).
//
// Layouts (N blocks of T tokens, L layers, H KV heads of D elements, e bytes
// per element):
//  - vllm-nhd: L tensors [2, N, T, H, D] (one per layer; K then V). A block
//    is 2L chunks of T*H*D*e bytes, in order (layer, K/V).
//  - vllm-hnd: L tensors [2, N, H, T, D]; chunks as vllm-nhd, heads outermost
//    inside a chunk.
//  - cross-layer: one tensor [N, L, 2, T, H, D]; a block is one chunk.
//  - sglang-page-first: one tensor [2, N*T, L, H, D] (SGLang HiCache's
//    page_first host layout, pages of T tokens); a block is 2 chunks (K, V)
//    of T*L*H*D*e bytes.
// Tile(layer, kv) says where one layer's K or V lies inside the block format
// (element strides), which is what the fp8 codec needs.
//
// Thread-safety: EngineLayout is an immutable value.
#ifndef KVTIER_DATAPATH_ENGINE_LAYOUT_H_
#define KVTIER_DATAPATH_ENGINE_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "datapath/copy_engine.h"

namespace kvtier {

enum class EngineLayoutKind { kVllmNhd, kVllmHnd, kCrossLayer, kSglangPageFirst };

absl::StatusOr<EngineLayoutKind> ParseEngineLayoutKind(absl::string_view name);
std::string EngineLayoutKindName(EngineLayoutKind kind);

struct KvShape {
  int num_layers = 0;
  int64_t num_blocks = 0;  // blocks in the engine's tensors
  int block_tokens = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int dtype_bytes = 0;  // 1, 2 or 4
};

// Where one chunk of an engine block starts: a tensor and a byte offset.
struct ChunkPlace {
  int tensor = 0;
  uint64_t offset = 0;
};

// One layer's K or V inside the block format, in elements: element
// (token t, head h, dim d) is at offset + t*token_stride + h*head_stride + d.
struct TileView {
  uint64_t offset = 0;
  uint64_t token_stride = 0;
  uint64_t head_stride = 0;
};

class EngineLayout {
 public:
  // INVALID_ARGUMENT for a non-positive dimension, a dtype size other than 1,
  // 2 or 4, or tensors larger than 2^62 bytes.
  static absl::StatusOr<EngineLayout> Create(EngineLayoutKind kind, const KvShape& shape);

  EngineLayoutKind kind() const { return kind_; }
  const KvShape& shape() const { return shape_; }
  int num_tensors() const { return num_tensors_; }
  uint64_t tensor_bytes() const { return tensor_bytes_; }  // each tensor
  int chunks_per_block() const { return chunks_per_block_; }
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  uint64_t block_bytes() const { return chunk_bytes_ * chunks_per_block_; }
  // Elements of one layer's K (or V) in a block: T*H*D.
  uint64_t tile_elements() const;

  // Chunk `chunk` of engine block `block`; both must be in range.
  ChunkPlace Chunk(int64_t block, int chunk) const;
  TileView Tile(int layer, int kv) const;

 private:
  EngineLayout(EngineLayoutKind kind, const KvShape& shape);

  EngineLayoutKind kind_;
  KvShape shape_;
  int num_tensors_ = 0;
  uint64_t tensor_bytes_ = 0;
  int chunks_per_block_ = 0;
  uint64_t chunk_bytes_ = 0;
};

// The copies that gather engine blocks `blocks` out of `tensors` (one base
// pointer per layout tensor) into `dst`, block i at dst + i*block_bytes().
// INVALID_ARGUMENT for a wrong tensor count, a null tensor or a block id out
// of range.
absl::StatusOr<std::vector<CopyOp>> PlanGather(const EngineLayout& layout,
                                               absl::Span<void* const> tensors,
                                               absl::Span<const int64_t> blocks, void* dst);
// The reverse: block i at src + i*block_bytes() scattered into `tensors`.
// Also INVALID_ARGUMENT when a block id repeats (two writes to one place).
absl::StatusOr<std::vector<CopyOp>> PlanScatter(const EngineLayout& layout,
                                                absl::Span<void* const> tensors,
                                                absl::Span<const int64_t> blocks, const void* src);

}  // namespace kvtier

#endif  // KVTIER_DATAPATH_ENGINE_LAYOUT_H_
