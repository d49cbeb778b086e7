// The Get stream's messages as gRPC sends them, for KvCacheService's Get,
// which gRPC serves as a raw method (grpc::ByteBuffer in and out) so that a
// block's bytes are copied once on their way out: into the slice gRPC
// sends. The typed method copied them twice, into the GetChunk message's
// string and again when gRPC serialized it. (A namespace with a storage
// encoding serves from its decode buffer: one copy more, as before.)
//
// Thread-safety: free functions of their arguments.
#ifndef KVTIER_SERVER_GET_CHUNK_FRAME_H_
#define KVTIER_SERVER_GET_CHUNK_FRAME_H_

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kvtier {

// A v1::GetChunk of `key` (empty: not the block's first chunk, which
// alone carries key and block_bytes), `block_bytes`, `offset` and `data`:
// the leading fields serialized by protobuf, then the data field's tag and
// length, then the data, copied into a slice of its own: the bytes
// protobuf writes for the GetChunk with those fields.
grpc::ByteBuffer GetChunkFrame(absl::string_view key, uint64_t block_bytes, uint64_t offset,
                               absl::Span<const uint8_t> data);

// Parses a raw method's request into `message`; INVALID_ARGUMENT, naming
// `what`, for bytes that are not one.
absl::Status ParseRawRequest(const grpc::ByteBuffer& raw, absl::string_view what,
                             google::protobuf::MessageLite* message);

}  // namespace kvtier

#endif  // KVTIER_SERVER_GET_CHUNK_FRAME_H_
