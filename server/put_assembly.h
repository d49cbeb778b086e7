// PutAssembly: the blocks of one Put, assembled from the chunks of its
// stream. A chunk that names a key starts a block (block_bytes long, under
// parent_key); the chunks after it append its bytes in order. Plain
// namespaces stream each chunk into a BlockCache::PutBatch as it comes;
// encoded ones collect each block whole, then encode and store it. Nothing
// is stored until Commit, which stores every block or none.
//
// This class knows nothing of gRPC: KvCacheService::Put hands it the fields
// of each PutChunk message.
//
// Thread-safety: externally synchronized (one Put stream owns it).
#ifndef KVTIER_SERVER_PUT_ASSEMBLY_H_
#define KVTIER_SERVER_PUT_ASSEMBLY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "encoding/block_transform.h"
#include "server/storage_encoding.h"
#include "storage/block_cache.h"
#include "storage/block_key.h"

namespace kvtier {

// A chunk's data: one view, or several in order (the slices gRPC received
// it in: server/put_chunk_frame.h). Views only, like PutChunkFields.
class ChunkBytes {
 public:
  ChunkBytes() = default;
  // Implicit, so that a chunk of one piece is written as its bytes.
  ChunkBytes(absl::string_view one) : one_(one), size_(one.size()) {}         // NOLINT
  ChunkBytes(const std::string& one) : ChunkBytes(absl::string_view(one)) {}  // NOLINT
  ChunkBytes(const char* one) : ChunkBytes(absl::string_view(one)) {}         // NOLINT
  explicit ChunkBytes(absl::Span<const absl::string_view> pieces) : pieces_(pieces) {
    for (absl::string_view p : pieces) size_ += p.size();
  }

  absl::Span<const absl::string_view> pieces() const {
    return pieces_.empty() ? absl::Span<const absl::string_view>(&one_, 1) : pieces_;
  }
  uint64_t size() const { return size_; }

 private:
  absl::string_view one_;
  absl::Span<const absl::string_view> pieces_;
  uint64_t size_ = 0;
};

// One chunk of a Put stream, as the bytes its message carried (the views
// need to live only for the call to Add).
struct PutChunkFields {
  absl::string_view namespace_id;  // hex; required on the first chunk
  absl::string_view key;           // non-empty: this chunk starts a block
  absl::string_view parent_key;
  uint64_t block_bytes = 0;
  ChunkBytes data;
  uint32_t group = 0;  // the layer group of a hybrid namespace's block
  // First chunk: the Put's retention priority (validated), if given.
  std::optional<uint8_t> retention = std::nullopt;
};

class PutAssembly {
 public:
  // Blocks go to `cache`, into a namespace of `tenant`; `transforms` gives
  // the namespace's encoding. Both must outlive this.
  PutAssembly(BlockCache* cache, const NamespaceTransforms* transforms, std::string tenant)
      : cache_(cache), transforms_(transforms), tenant_(std::move(tenant)) {}
  PutAssembly(const PutAssembly&) = delete;
  PutAssembly& operator=(const PutAssembly&) = delete;

  // The next chunk. INVALID_ARGUMENT naming the chunk (by its index in the
  // stream) or block for a malformed one; the refusals of CheckTenant,
  // BeginPut, StartBlock and Append as they come. After an error the Put is
  // over: the caller answers with it and drops this.
  absl::Status Add(const PutChunkFields& chunk);

  // Stores what the stream carried, once it has finished cleanly.
  // INVALID_ARGUMENT for a stream without chunks or an encoded block cut
  // short; otherwise what PutBatch::Commit answers.
  absl::StatusOr<PutResult> Commit();

  // The namespace and the key of the last block started (the end of the
  // chain a Put stores, as engines send them); unset before the first.
  std::optional<NamespaceId> ns() const {
    return batch_ == nullptr ? std::nullopt : std::optional<NamespaceId>(batch_->ns());
  }
  const BlockKey& last_key() const { return last_key_; }
  // The chunks Add has taken (refused ones included): the next one's index.
  int64_t chunks_added() const { return index_ + 1; }

 private:
  // An encoded namespace's block, collected whole before it is encoded.
  struct Pending {
    BlockKey key, parent;
    std::string data;
  };

  absl::Status Begin(const PutChunkFields& chunk);
  // Encodes and stores the pending block, if any.
  absl::Status Flush();

  BlockCache* const cache_;
  const NamespaceTransforms* const transforms_;
  const std::string tenant_;
  int64_t index_ = -1;  // of the chunk being added
  std::unique_ptr<BlockCache::PutBatch> batch_;
  std::shared_ptr<BlockTransform> transform_;  // null: stored as given
  std::optional<Pending> pending_;
  std::vector<uint8_t> encoded_;
  BlockKey last_key_;
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_PUT_ASSEMBLY_H_
