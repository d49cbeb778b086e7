#include "server/proto_convert.h"

#include <gtest/gtest.h>

#include <string>

namespace kvtier {
namespace {

constexpr char kNs[] = "0123456789abcdef0123456789abcdef";
constexpr size_t kMax = 4;  // keys per request

v1::LookupRequest Packed(const std::string& packed, uint32_t width) {
  v1::LookupRequest req;
  req.set_namespace_id(kNs);
  req.set_packed_keys(packed);
  req.set_packed_key_bytes(width);
  return req;
}

TEST(LookupKeysFromProtoTest, PackedKeysReadAsTheSameKeysRepeated) {
  v1::LookupRequest repeated;
  repeated.set_namespace_id(kNs);
  for (const char* k : {"key-one!", "key-two!", "key-3..."}) repeated.add_keys(k);
  const v1::LookupRequest packed = Packed("key-one!key-two!key-3...", 8);
  absl::StatusOr<NamespaceKeys> a = LookupKeysFromProto(repeated, kMax);
  absl::StatusOr<NamespaceKeys> b = LookupKeysFromProto(packed, kMax);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->ns, b->ns);
  ASSERT_EQ(b->keys.size(), 3u);
  EXPECT_EQ(a->keys, b->keys);
  EXPECT_EQ(b->keys[1].bytes(), "key-two!");
  EXPECT_EQ(LookupKeyCount(repeated), 3u);
  EXPECT_EQ(LookupKeyCount(packed), 3u);
  // The widest keys, and one key of one byte.
  EXPECT_EQ(LookupKeysFromProto(Packed(std::string(64, 'k'), 32), kMax)->keys.size(), 2u);
  EXPECT_EQ(LookupKeysFromProto(Packed("k", 1), kMax)->keys.size(), 1u);
}

TEST(LookupKeysFromProtoTest, NoKeysInEitherFormIsNoKeys) {
  v1::LookupRequest req;
  req.set_namespace_id(kNs);
  absl::StatusOr<NamespaceKeys> none = LookupKeysFromProto(req, kMax);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->keys.empty());
  absl::StatusOr<NamespaceKeys> empty_packed = LookupKeysFromProto(Packed("", 16), kMax);
  ASSERT_TRUE(empty_packed.ok()) << empty_packed.status();
  EXPECT_TRUE(empty_packed->keys.empty());
}

TEST(LookupKeysFromProtoTest, MalformedPackedKeysAreRefusedWithTheReason) {
  auto refused = [](const v1::LookupRequest& req, const std::string& reason) {
    absl::StatusOr<NamespaceKeys> r = LookupKeysFromProto(req, kMax);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(reason), std::string::npos) << r.status();
  };
  v1::LookupRequest both = Packed("aabb", 2);
  both.add_keys("cc");
  refused(both, "not both");
  refused(Packed("aabb", 0), "packed_key_bytes is 0");
  refused(Packed(std::string(33, 'k'), 33), "packed_key_bytes is 33");
  refused(Packed("aabbc", 2), "5 bytes, not a whole number of 2-byte keys");
  // More keys than a request may hold: refused before any is parsed.
  refused(Packed("abcde", 1), "request has 5 keys; must be 1..4");
  EXPECT_EQ(LookupKeysFromProto(Packed("abcd", 1), kMax)->keys.size(), 4u);
  v1::LookupRequest bad_ns = Packed("aabb", 2);
  bad_ns.set_namespace_id("not-hex");
  EXPECT_EQ(LookupKeysFromProto(bad_ns, kMax).status().code(), absl::StatusCode::kInvalidArgument);
  // A torn length counts the whole keys only.
  EXPECT_EQ(LookupKeyCount(Packed("aabbc", 2)), 2u);
  EXPECT_EQ(LookupKeyCount(Packed("aabb", 0)), 0u);
}

// Too many keys are refused before anything is parsed or done (with a
// cluster tier, Lookup and Get fill from a peer first), in either form.
TEST(KeyCountTest, TooManyKeysAreRefusedBeforeAnyIsParsedInEitherForm) {
  v1::LookupRequest repeated;
  repeated.set_namespace_id(kNs);
  for (int i = 0; i < 5; ++i) repeated.add_keys(std::string(1, 'k'));
  auto too_many = [](const v1::LookupRequest& req) {
    absl::StatusOr<NamespaceKeys> r = LookupKeysFromProto(req, kMax);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("request has 5 keys; must be 1..4"), std::string::npos)
        << r.status();
  };
  too_many(repeated);
  too_many(Packed("abcde", 1));
  // Counted before the namespace is read: the count is the first refusal.
  repeated.set_namespace_id("not-hex");
  EXPECT_NE(LookupKeysFromProto(repeated, kMax).status().message().find("5 keys"),
            std::string::npos);
  absl::StatusOr<NamespaceKeys> get = NamespaceKeysFromProto(kNs, repeated.keys(), 4);
  EXPECT_EQ(get.status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(NamespaceKeysFromProto(kNs, repeated.keys(), 5).ok());
  ASSERT_TRUE(NamespaceKeysFromProto(kNs, repeated.keys()).ok());  // no limit given
}

}  // namespace
}  // namespace kvtier
