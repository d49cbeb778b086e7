#include "server/get_chunk_frame.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/slice.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "kvtier/v1/kvcache.pb.h"

namespace kvtier {

grpc::ByteBuffer GetChunkFrame(absl::string_view key, uint64_t block_bytes, uint64_t offset,
                               absl::Span<const uint8_t> data) {
  v1::GetChunk head;
  if (!key.empty()) {
    head.set_key(std::string(key));
    head.set_block_bytes(block_bytes);
  }
  head.set_offset(offset);
  std::string bytes = head.SerializeAsString();
  if (data.empty()) {  // proto3 leaves an empty field out
    grpc::Slice only(bytes);
    return grpc::ByteBuffer(&only, 1);
  }
  {
    google::protobuf::io::StringOutputStream stream(&bytes);  // appends
    google::protobuf::io::CodedOutputStream out(&stream);
    constexpr uint32_t kLengthDelimited = 2;  // the wire type of bytes fields
    out.WriteTag((uint32_t{v1::GetChunk::kDataFieldNumber} << 3) | kLengthDelimited);
    out.WriteVarint64(data.size());
  }
  const grpc::Slice slices[] = {grpc::Slice(bytes), grpc::Slice(data.data(), data.size())};
  return grpc::ByteBuffer(slices, 2);
}

absl::Status ParseRawRequest(const grpc::ByteBuffer& raw, absl::string_view what,
                             google::protobuf::MessageLite* message) {
  grpc::ByteBuffer shared(raw);  // the same slices, referenced
  grpc::ProtoBufferReader reader(&shared);
  if (!reader.status().ok() || !message->ParseFromZeroCopyStream(&reader)) {
    return absl::InvalidArgumentError(absl::StrCat("malformed ", what));
  }
  return absl::OkStatus();
}

}  // namespace kvtier
