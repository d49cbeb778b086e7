#include "server/put_assembly.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "server/proto_convert.h"

namespace kvtier {
namespace {

absl::Span<const uint8_t> Bytes(absl::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

absl::Status PutAssembly::Begin(const PutChunkFields& chunk) {
  ASSIGN_OR_RETURN(NamespaceId ns, NamespaceIdFromProto(chunk.namespace_id));
  RETURN_IF_ERROR(cache_->CheckTenant(ns, tenant_));
  ASSIGN_OR_RETURN(std::unique_ptr<BlockCache::PutBatch> b, cache_->BeginPut(ns));
  batch_ = std::move(b);
  batch_->set_retention(chunk.retention);
  transform_ = transforms_->Find(ns);
  if (transform_ != nullptr) encoded_.resize(transform_->stored_bytes());
  return absl::OkStatus();
}

absl::Status PutAssembly::Flush() {
  if (!pending_.has_value()) return absl::OkStatus();
  if (pending_->data.size() != transform_->plain_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("block ", pending_->key.ToHex(), " got ",
                                                   pending_->data.size(), " of its ",
                                                   transform_->plain_bytes(), " bytes"));
  }
  absl::Status s = transform_->Encode(Bytes(pending_->data), absl::MakeSpan(encoded_));
  if (s.ok()) s = batch_->StartBlock(pending_->key, pending_->parent, encoded_.size());
  if (s.ok()) s = batch_->Append(encoded_);
  pending_.reset();
  return s;
}

absl::Status PutAssembly::Add(const PutChunkFields& chunk) {
  ++index_;
  if (batch_ == nullptr) {
    RETURN_IF_ERROR(Begin(chunk));
  } else if (chunk.retention.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", index_, ": retention_priority is read from the first chunk only"));
  } else if (!chunk.namespace_id.empty()) {
    ASSIGN_OR_RETURN(NamespaceId ns, NamespaceIdFromProto(chunk.namespace_id));
    if (!(ns == batch_->ns())) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk ", index_, ": all blocks of one Put must share a namespace"));
    }
  }
  if (chunk.data.size() > batch_->block_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", index_, " carries ", chunk.data.size(),
                     " bytes, more than the namespace's block size of ", batch_->block_bytes()));
  }
  if (!chunk.key.empty()) {
    ASSIGN_OR_RETURN(BlockKey key, OptionalKeyFromProto(chunk.key, "key"));
    ASSIGN_OR_RETURN(BlockKey parent, OptionalKeyFromProto(chunk.parent_key, "parent_key"));
    last_key_ = key;
    if (chunk.block_bytes == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk ", index_, " starts block ", key.ToHex(), " without block_bytes"));
    }
    if (transform_ != nullptr) {
      if (chunk.block_bytes != transform_->plain_bytes()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "block ", key.ToHex(), ": ", chunk.block_bytes, " bytes; this namespace stores ",
            transform_->Describe(), ", which takes whole blocks of ", transform_->plain_bytes()));
      }
      RETURN_IF_ERROR(Flush());
      pending_ = Pending{key, parent, {}};
      pending_->data.reserve(transform_->plain_bytes());
    } else if (absl::Status s = batch_->StartBlock(key, parent, chunk.block_bytes, chunk.group);
               !s.ok()) {
      return s;
    }
  } else if (!chunk.parent_key.empty() || chunk.block_bytes != 0 || chunk.group != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", index_, " sets parent_key, block_bytes or group without a key"));
  }
  if (transform_ == nullptr) return batch_->Append(chunk.data.pieces());
  if (!pending_.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", index_, " has data but no block"));
  }
  if (pending_->data.size() + chunk.data.size() > transform_->plain_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", index_, ": block ",
                                                   pending_->key.ToHex(), " overflows its ",
                                                   transform_->plain_bytes(), " bytes"));
  }
  for (absl::string_view piece : chunk.data.pieces())
    pending_->data.append(piece.data(), piece.size());
  return absl::OkStatus();
}

absl::StatusOr<PutResult> PutAssembly::Commit() {
  if (batch_ == nullptr) return absl::InvalidArgumentError("Put carried no blocks");
  if (transform_ != nullptr) {
    RETURN_IF_ERROR(Flush());
  }
  return batch_->Commit();
}

}  // namespace kvtier
