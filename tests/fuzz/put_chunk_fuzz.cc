// libFuzzer target: server/put_chunk_frame.h's PutChunkFrame, the Put
// stream's parser of the messages gRPC receives, against protobuf's own
// parser of the same bytes.
//
// Input: byte 0 picks how many slices the message arrives in (1-8, cut at
// even places), the rest is the message.
//
// Properties checked, besides no crash or sanitizer report: the frame
// accepts exactly what protobuf accepts, and then reads the same data and
// the same other fields.
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kvtier/v1/kvcache.pb.h"
#include "server/put_chunk_frame.h"

namespace {

using kvtier::PutChunkFrame;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "PutChunkFrame disagrees with protobuf: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // Invalid UTF-8 in a string field is an expected refusal, not news.
  google::protobuf::SetLogHandler(nullptr);
  const size_t pieces = 1 + data[0] % 8;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < pieces; ++i) {
    const size_t begin = bytes.size() * i / pieces, end = bytes.size() * (i + 1) / pieces;
    if (end > begin || slices.empty()) slices.emplace_back(bytes.data() + begin, end - begin);
  }
  kvtier::v1::PutChunk want;
  const bool want_ok = want.ParseFromString(bytes);
  PutChunkFrame frame;
  grpc::ByteBuffer raw(slices.data(), slices.size());
  const bool ok = frame.Parse(&raw).ok();
  if (ok != want_ok) Fail(ok ? "accepted what protobuf refuses" : "refused a PutChunk");
  if (!ok) return 0;
  std::string got;
  for (auto piece : frame.data()) got.append(piece.data(), piece.size());
  if (got != want.data()) Fail("other data");
  want.clear_data();
  if (frame.fields().SerializeAsString() != want.SerializeAsString()) Fail("other fields");
  return 0;
}
