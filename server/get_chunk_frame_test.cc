#include "server/get_chunk_frame.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvtier/v1/kvcache.pb.h"
#include "testing/test_bytes.h"

namespace kvtier {
namespace {

std::string Dump(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

v1::GetChunk Parse(const grpc::ByteBuffer& frame) {
  v1::GetChunk chunk;
  EXPECT_TRUE(chunk.ParseFromString(Dump(frame)));
  return chunk;
}

TEST(GetChunkFrameTest, AFirstChunkParsesWithItsKeySizeAndData) {
  const std::vector<uint8_t> block = DeterministicBytes("block", 300000);
  const v1::GetChunk c = Parse(GetChunkFrame("key-1", block.size(), 0, block));
  EXPECT_EQ(c.key(), "key-1");
  EXPECT_EQ(c.block_bytes(), 300000u);
  EXPECT_EQ(c.offset(), 0u);
  EXPECT_EQ(c.data(), std::string(block.begin(), block.end()));
}

TEST(GetChunkFrameTest, ALaterChunkCarriesItsOffsetAndNoKey) {
  const std::vector<uint8_t> block = DeterministicBytes("block", 5000);
  const absl::Span<const uint8_t> tail = absl::MakeConstSpan(block).subspan(4096);
  const v1::GetChunk c = Parse(GetChunkFrame("", block.size(), 4096, tail));
  EXPECT_EQ(c.key(), "");
  EXPECT_EQ(c.block_bytes(), 0u);  // only the first chunk says it
  EXPECT_EQ(c.offset(), 4096u);
  EXPECT_EQ(c.data(), std::string(tail.begin(), tail.end()));
}

TEST(GetChunkFrameTest, IsTheBytesProtobufWritesForTheSameMessage) {
  // Any valid encoding parses; this one is also protobuf's own (fields in
  // number order), so a client sees what the typed method sent.
  const std::vector<uint8_t> data = DeterministicBytes("d", 200);  // a 2-byte length
  v1::GetChunk typed;
  typed.set_key(std::string(32, 'k'));
  typed.set_block_bytes(70000);
  typed.set_offset(65536);
  typed.set_data(std::string(data.begin(), data.end()));
  EXPECT_EQ(Dump(GetChunkFrame(typed.key(), 70000, 65536, data)), typed.SerializeAsString());
}

TEST(GetChunkFrameTest, AnEmptyChunkIsProtobufsEncodingToo) {
  v1::GetChunk typed;
  typed.set_offset(7);
  EXPECT_EQ(Dump(GetChunkFrame("", 0, 7, {})), typed.SerializeAsString());
}

TEST(GetChunkFrameTest, CopiesTheDataOut) {
  std::vector<uint8_t> block = DeterministicBytes("block", 1024);
  const grpc::ByteBuffer frame = GetChunkFrame("k", block.size(), 0, block);
  const std::string want(block.begin(), block.end());
  block.assign(block.size(), 0);  // the block's slot is reused once unpinned
  EXPECT_EQ(Parse(frame).data(), want);
}

TEST(ParseRawRequestTest, ParsesARequestAndRefusesGarbageNamingIt) {
  v1::GetRequest sent;
  sent.set_namespace_id("ns");
  const std::vector<std::string> keys = {std::string(32, 'a'), std::string(32, 'b')};
  for (const std::string& k : keys) sent.add_keys(k);
  const std::string wire = sent.SerializeAsString();
  grpc::Slice slice(wire);
  const grpc::ByteBuffer raw(&slice, 1);
  v1::GetRequest got;
  ASSERT_TRUE(ParseRawRequest(raw, "GetRequest", &got).ok());
  EXPECT_EQ(got.namespace_id(), "ns");
  ASSERT_EQ(got.keys_size(), 2);
  EXPECT_EQ(got.keys(1), keys[1]);

  grpc::Slice junk(std::string("\xff\xff\xff", 3));
  const grpc::ByteBuffer bad(&junk, 1);
  absl::Status s = ParseRawRequest(bad, "GetRequest", &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("GetRequest"), std::string::npos) << s;
}

}  // namespace
}  // namespace kvtier
