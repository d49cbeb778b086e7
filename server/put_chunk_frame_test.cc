#include "server/put_chunk_frame.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "testing/test_bytes.h"

namespace kvtier {
namespace {

// `bytes` as gRPC might hold them: in `pieces` slices cut at random places.
grpc::ByteBuffer Sliced(const std::string& bytes, int pieces, std::mt19937_64& rng) {
  std::vector<size_t> cuts = {0, bytes.size()};
  for (int i = 1; i < pieces && !bytes.empty(); ++i) cuts.push_back(rng() % bytes.size());
  std::sort(cuts.begin(), cuts.end());
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    if (cuts[i + 1] > cuts[i] || slices.empty()) {
      slices.emplace_back(bytes.data() + cuts[i], cuts[i + 1] - cuts[i]);
    }
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Joined(absl::Span<const absl::string_view> pieces) {
  std::string out;
  for (absl::string_view p : pieces) out.append(p.data(), p.size());
  return out;
}

v1::PutChunk RandomChunk(std::mt19937_64& rng, int i) {
  v1::PutChunk c;
  if (rng() % 2) c.set_namespace_id(std::string(32, 'a' + i % 6));
  if (rng() % 2) c.set_key(DeterministicString(absl::StrCat("k", i), 1 + rng() % 32));
  if (rng() % 2) c.set_parent_key(DeterministicString(absl::StrCat("p", i), 1 + rng() % 32));
  if (rng() % 2) c.set_block_bytes(rng() % (uint64_t{1} << (rng() % 40)));
  if (rng() % 4) c.set_data(DeterministicString(absl::StrCat("d", i), rng() % 70000));
  if (rng() % 3 == 0) c.set_group(rng() % 5);
  if (rng() % 3 == 0) c.set_retention_priority(rng() % 300);
  return c;
}

// What protobuf reads from `bytes`, against what PutChunkFrame reads. With
// `as_serialized` (bytes protobuf's serializer wrote), the data must also
// stay in the received slices (not copied).
void ExpectReadsAsProtobuf(const std::string& bytes, int pieces, std::mt19937_64& rng,
                           const std::string& what, bool as_serialized = false) {
  v1::PutChunk want;
  const bool want_ok = want.ParseFromString(bytes);
  PutChunkFrame frame;
  grpc::ByteBuffer raw = Sliced(bytes, pieces, rng);
  const absl::Status s = frame.Parse(&raw);
  ASSERT_EQ(s.ok(), want_ok) << what << ": " << s << "; its first bytes "
                             << absl::BytesToHexString(bytes.substr(0, 64));
  if (!want_ok) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_TRUE(frame.data().empty()) << what;
    return;
  }
  EXPECT_EQ(Joined(frame.data()), want.data()) << what;
  if (as_serialized) {
    EXPECT_FALSE(frame.copied()) << what;
  }
  EXPECT_EQ(frame.fields().data(), "") << what;
  want.clear_data();
  EXPECT_EQ(frame.fields().SerializeAsString(), want.SerializeAsString()) << what;
}

TEST(PutChunkFrameTest, ReadsWhatProtobufReadsFromAnyPutChunkInAnySlices) {
  std::mt19937_64 rng(20);
  for (int i = 0; i < 400; ++i) {
    ExpectReadsAsProtobuf(RandomChunk(rng, i).SerializeAsString(), 1 + i % 7, rng,
                          absl::StrCat("chunk ", i), /*as_serialized=*/true);
  }
}

TEST(PutChunkFrameTest, RefusesWhatProtobufRefusesAndAgreesOnDamagedMessages) {
  std::mt19937_64 rng(21);
  for (int i = 0; i < 3000; ++i) {
    std::string bytes = RandomChunk(rng, i).SerializeAsString();
    switch (i % 5) {
      case 0:  // a byte changed
        if (!bytes.empty()) bytes[rng() % bytes.size()] = static_cast<char>(rng());
        break;
      case 1:  // cut short
        bytes.resize(bytes.empty() ? 0 : rng() % bytes.size());
        break;
      case 2:  // junk appended
        bytes += DeterministicString(absl::StrCat("j", i), 1 + rng() % 12);
        break;
      case 3:  // a second message's fields after the first's (protobuf merges)
        bytes += RandomChunk(rng, i + 1).SerializeAsString();
        break;
      case 4:  // bytes changed near the start, where tags and lengths are
        for (int k = 0; k < 3 && !bytes.empty(); ++k) {
          bytes[rng() % std::min<size_t>(bytes.size(), 48)] = static_cast<char>(rng());
        }
        break;
    }
    ExpectReadsAsProtobuf(bytes, 1 + i % 5, rng, absl::StrCat("damaged message ", i));
  }
}

TEST(PutChunkFrameTest, TheDataStaysInTheReceivedSlices) {
  v1::PutChunk c;
  c.set_key("k");
  c.set_block_bytes(100000);
  c.set_data(DeterministicString("d", 100000));
  const std::string bytes = c.SerializeAsString();
  const std::vector<grpc::Slice> slices = {grpc::Slice(bytes.data(), 40000),
                                           grpc::Slice(bytes.data() + 40000, bytes.size() - 40000)};
  PutChunkFrame frame;
  grpc::ByteBuffer raw(slices.data(), slices.size());
  ASSERT_TRUE(frame.Parse(&raw).ok());
  EXPECT_EQ(raw.Length(), 0u) << "the frame took the message";
  // Two views: the tail of the first slice and the whole second one, where
  // gRPC holds them (the slices are shared, not copied).
  ASSERT_EQ(frame.data().size(), 2u);
  const auto* first_end = reinterpret_cast<const char*>(slices[0].end());
  EXPECT_EQ(frame.data()[0].data() + frame.data()[0].size(), first_end);
  EXPECT_EQ(frame.data()[1].data(), reinterpret_cast<const char*>(slices[1].begin()));
  EXPECT_EQ(Joined(frame.data()), c.data());
  EXPECT_FALSE(frame.copied());
  EXPECT_EQ(frame.fields().key(), "k");
  EXPECT_EQ(frame.fields().block_bytes(), 100000u);
}

TEST(PutChunkFrameTest, AnEmptyMessageIsAnEmptyChunkAndGarbageIsRefused) {
  std::mt19937_64 rng(22);
  PutChunkFrame frame;
  auto parse = [&](const std::string& bytes, int pieces) {
    grpc::ByteBuffer raw = Sliced(bytes, pieces, rng);
    return frame.Parse(&raw);
  };
  ASSERT_TRUE(parse("", 1).ok());
  EXPECT_EQ(Joined(frame.data()), "");
  EXPECT_EQ(frame.fields().SerializeAsString(), "");
  // A data field longer than the message.
  const absl::Status s = parse(std::string("\x2a\x80\x01xyz", 6), 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("PutChunk"), std::string::npos) << s;
  // Invalid UTF-8 in namespace_id (a proto3 string), as protobuf refuses.
  EXPECT_FALSE(parse(std::string("\x0a\x02\xc3\x28", 4), 1).ok());
  // Numbers in more bytes than needed are still a PutChunk (protobuf parses
  // it): block_bytes 1 in two bytes, data of 2 bytes with a two-byte length.
  ASSERT_TRUE(parse(std::string("\x20\x81\x00\x2a\x82\x00xy", 8), 3).ok());
  EXPECT_EQ(frame.fields().block_bytes(), 1u);
  EXPECT_EQ(Joined(frame.data()), "xy");
  EXPECT_TRUE(frame.copied());
}

}  // namespace
}  // namespace kvtier
