#include "server/put_chunk_frame.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <algorithm>
#include <climits>
#include <utility>

namespace kvtier {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;

// Protobuf's wire types (the low 3 bits of a tag).
enum WireType : uint32_t {
  kVarint = 0,
  kLengthDelimited = 2,
};

constexpr uint32_t Tag(int field, WireType type) {
  return (static_cast<uint32_t>(field) << 3) | type;
}

constexpr uint32_t kDataTag = Tag(v1::PutChunk::kDataFieldNumber, kLengthDelimited);

// The longest length-delimited value protobuf's parser takes (a size up to
// INT_MAX less its 16 slop bytes); a longer one is left to protobuf.
constexpr uint64_t kMaxLength = INT_MAX - 16;

// The tags protobuf's serializer writes for PutChunk's fields but data.
bool IsOtherField(uint32_t tag) {
  switch (tag) {
    case Tag(v1::PutChunk::kNamespaceIdFieldNumber, kLengthDelimited):
    case Tag(v1::PutChunk::kKeyFieldNumber, kLengthDelimited):
    case Tag(v1::PutChunk::kParentKeyFieldNumber, kLengthDelimited):
    case Tag(v1::PutChunk::kBlockBytesFieldNumber, kVarint):
    case Tag(v1::PutChunk::kGroupFieldNumber, kVarint):
    case Tag(v1::PutChunk::kRetentionPriorityFieldNumber, kVarint):
      return true;
    default:
      return false;
  }
}

// Copies the value of a field of tag `tag` (one IsOtherField names, already
// read) from `in` to `out`, after the tag, re-encoded.
bool CopyField(uint32_t tag, CodedInputStream& in, CodedOutputStream& out) {
  out.WriteTag(tag);
  if ((tag & 7) == kVarint) {
    uint64_t v;
    if (!in.ReadVarint64(&v)) return false;
    out.WriteVarint64(v);
    return true;
  }
  uint32_t n;
  std::string bytes;
  if (!in.ReadVarint32(&n) || n > kMaxLength || !in.ReadString(&bytes, static_cast<int>(n))) {
    return false;
  }
  out.WriteVarint32(n);
  out.WriteString(bytes);
  return true;
}

}  // namespace

void PutChunkFrame::Clear() {
  slices_.clear();
  held_.Clear();
  fields_.Clear();
  data_.clear();
  rest_.clear();
  copied_data_.clear();
  copied_ = false;
}

absl::Status PutChunkFrame::Parse(grpc::ByteBuffer* raw) {
  Clear();
  grpc::ByteBuffer taken;
  taken.Swap(raw);
  if (!taken.Dump(&slices_).ok()) return absl::InvalidArgumentError("malformed PutChunk");
  grpc::ByteBuffer held(slices_.data(), slices_.size());
  held_.Swap(&held);
  if (Split()) return absl::OkStatus();
  // Not as protobuf's serializer writes a PutChunk (or not one at all):
  // protobuf parses it, and decides.
  fields_.Clear();
  data_.clear();
  rest_.clear();
  grpc::ProtoBufferReader reader(&held_);
  if (!reader.status().ok() || !fields_.ParseFromZeroCopyStream(&reader)) {
    Clear();
    return absl::InvalidArgumentError("malformed PutChunk");
  }
  copied_ = true;
  copied_data_ = std::move(*fields_.mutable_data());
  fields_.clear_data();
  data_.emplace_back(copied_data_);
  slices_.clear();
  held_.Clear();
  return absl::OkStatus();
}

bool PutChunkFrame::Split() {
  grpc::ProtoBufferReader reader(&held_);
  if (!reader.status().ok()) return false;
  CodedInputStream in(&reader);
  uint64_t other_bytes = 0;  // of the fields copied to rest_, as received
  {
    google::protobuf::io::StringOutputStream rest_stream(&rest_);
    CodedOutputStream out(&rest_stream);
    for (;;) {
      const int start = in.CurrentPosition();
      const uint32_t tag = in.ReadTag();
      if (tag == 0) {
        if (!in.ConsumedEntireMessage()) return false;  // a malformed tag
        break;
      }
      if (in.CurrentPosition() - start != 1) return false;  // every field's tag is one byte
      if (IsOtherField(tag)) {
        if (!CopyField(tag, in, out)) return false;
        other_bytes += in.CurrentPosition() - start;
        continue;
      }
      if (tag != kDataTag) return false;
      // The data, left where it lies: a view of each slice it spans. A
      // later data field replaces it, as in protobuf.
      const int length_at = in.CurrentPosition();
      uint64_t n;
      if (!in.ReadVarint64(&n) || n > kMaxLength ||
          in.CurrentPosition() - length_at !=
              static_cast<int>(CodedOutputStream::VarintSize64(n))) {
        return false;
      }
      data_.clear();
      while (n > 0) {
        const void* at;
        int size;
        if (!in.GetDirectBufferPointer(&at, &size)) return false;
        const uint64_t take = std::min<uint64_t>(n, static_cast<uint64_t>(size));
        data_.emplace_back(static_cast<const char*>(at), take);
        in.Skip(static_cast<int>(take));
        n -= take;
      }
    }
  }
  // Each value re-encoded in fewest bytes, as protobuf writes them: a
  // message that used more for one is left to protobuf.
  return rest_.size() == other_bytes && fields_.ParseFromString(rest_);
}

}  // namespace kvtier
