// PutChunkFrame: one PutChunk as gRPC received it for KvCacheService's Put,
// a raw method (grpc::ByteBuffer in), split without copying the block's
// bytes. Every field but `data` is parsed by protobuf into fields(); the
// data stays in the received slices, as the views data() in order, until
// the block's slot copies it (PutAssembly). The typed method copied it
// once more, into the message's string, before the slot did.
//
// Parse accepts exactly the bytes protobuf accepts as a PutChunk and reads
// the same fields from them. It splits a message as protobuf's serializer
// writes one (each field's tag in one byte, its numbers in fewest bytes,
// no fields but PutChunk's; a later data field replaces an earlier one, as
// in protobuf); anything else (malformed, or encoded otherwise) protobuf
// parses, deciding, with the data copied. put_chunk_frame_test checks both
// against protobuf on random and damaged messages.
//
// Thread-safety: a value; one call uses it at a time.
#ifndef KVTIER_SERVER_PUT_CHUNK_FRAME_H_
#define KVTIER_SERVER_PUT_CHUNK_FRAME_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kvtier/v1/kvcache.pb.h"

namespace kvtier {

class PutChunkFrame {
 public:
  PutChunkFrame() = default;
  // Not copyable: data() views memory the frame holds.
  PutChunkFrame(const PutChunkFrame&) = delete;
  PutChunkFrame& operator=(const PutChunkFrame&) = delete;

  // Takes the message in `*raw` (its slices, leaving *raw empty) and splits
  // it. INVALID_ARGUMENT for bytes that are not a PutChunk; the frame is
  // then empty.
  absl::Status Parse(grpc::ByteBuffer* raw);

  // Every field of the message but data (data() is empty).
  const v1::PutChunk& fields() const { return fields_; }
  // The data field's bytes, in order; valid until the next Parse or Clear.
  absl::Span<const absl::string_view> data() const { return data_; }
  // Whether protobuf parsed the message, its data copied (see above).
  bool copied() const { return copied_; }

  // Lets go of the message (its slices).
  void Clear();

 private:
  // The split as described above; false, leaving the frame to be cleared,
  // for a message it does not take.
  bool Split();

  // The message's slices as the frame holds them (Dump's: a compressed
  // message's are its uncompressed bytes), and a buffer of them that
  // Split reads; data_ views their memory.
  std::vector<grpc::Slice> slices_;
  grpc::ByteBuffer held_;
  v1::PutChunk fields_;
  std::vector<absl::string_view> data_;
  std::string rest_;         // the other fields' bytes, for protobuf to parse
  std::string copied_data_;  // the data protobuf parsed, where Split did not take the message
  bool copied_ = false;
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_PUT_CHUNK_FRAME_H_
