#include "server/put_assembly.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "server/proto_convert.h"

namespace kvtier {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;
// 2 (K and V) * 1 layer * 1 head * 8 dims * 16 tokens * 2 bytes (bf16).
constexpr uint64_t kBlock = 512;

BlockKey Key(const std::string& k) { return *BlockKey::Create(k); }

std::string Bytes(char tag, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(tag + i % 7);
  return s;
}

class PutAssemblyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BlockCacheOptions o;
    o.host_bytes = 8 * kMiB;
    o.slab_bytes = kMiB;
    o.max_block_bytes = kMiB;
    cache_ = *BlockCache::Create(o, &clock_);
    plain_ = Open("plain", "", "");
    hex_ = plain_.ToHex();
  }

  NamespaceId Open(const std::string& model, const std::string& tenant,
                   const std::string& encoding) {
    NamespaceSpec s;
    s.model_id = model;
    s.tenant = tenant;
    s.encoding = encoding;
    s.layout = KvLayout{1, 1, 8, DType::kBf16, 16, 0, 1};
    absl::StatusOr<OpenNamespaceResult> r = cache_->OpenNamespace(s);
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->block_bytes, kBlock);
    if (!encoding.empty()) {
      absl::StatusOr<std::shared_ptr<BlockTransform>> t = TransformFor(s);
      EXPECT_TRUE(t.ok()) << t.status();
      transform_ = transforms_.Set(r->id, *t);
    }
    return r->id;
  }

  // The bytes `key` holds in `ns`, as stored.
  std::string Stored(const NamespaceId& ns, const std::string& key) {
    absl::StatusOr<std::vector<BlockCache::ReadHandle>> h = cache_->Read(ns, {Key(key)});
    EXPECT_TRUE(h.ok()) << h.status();
    if (!h.ok() || h->size() != 1) return "";
    absl::Span<const uint8_t> b = (*h)[0].bytes();
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }

  SystemClock clock_;
  std::unique_ptr<BlockCache> cache_;
  NamespaceTransforms transforms_;
  std::shared_ptr<BlockTransform> transform_;
  NamespaceId plain_;
  std::string hex_;
};

TEST_F(PutAssemblyTest, InOrderChunksStoreEachBlock) {
  PutAssembly put(cache_.get(), &transforms_, "");
  const std::string a = Bytes('a', kBlock), b = Bytes('b', 100);
  ASSERT_TRUE(put.Add({hex_, "k1", "", kBlock, a}).ok());
  ASSERT_TRUE(put.Add({"", "k2", "k1", 100, b}).ok());
  absl::StatusOr<PutResult> r = put.Commit();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->blocks_stored, 2u);
  EXPECT_EQ(r->blocks_already_cached, 0u);
  EXPECT_EQ(r->bytes_stored, kBlock + 100);
  EXPECT_EQ(Stored(plain_, "k1"), a);
  EXPECT_EQ(Stored(plain_, "k2"), b);
}

TEST_F(PutAssemblyTest, RetentionIsReadFromTheFirstChunkOnly) {
  PutAssembly put(cache_.get(), &transforms_, "");
  const std::string a = Bytes('a', kBlock);
  PutChunkFields first{hex_, "r1", "", kBlock, a};
  first.retention = 90;
  ASSERT_TRUE(put.Add(first).ok());
  PutChunkFields later{"", "r2", "r1", kBlock, a};
  later.retention = 10;
  const absl::Status s = put.Add(later);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("chunk 1: retention_priority is read from the first chunk only"),
            std::string::npos)
      << s;
  EXPECT_EQ(cache_->Lookup(plain_, {Key("r1")}, false, absl::ZeroDuration())->matched, 0u)
      << "nothing was stored";
}

TEST(RetentionFromProtoTest, UnsetIsNulloptAndAbove100IsRefused) {
  EXPECT_EQ(*RetentionFromProto(false, 7), std::nullopt);
  EXPECT_EQ(*RetentionFromProto(true, 0), std::optional<uint8_t>(0));
  EXPECT_EQ(*RetentionFromProto(true, 100), std::optional<uint8_t>(100));
  const absl::StatusOr<std::optional<uint8_t>> bad = RetentionFromProto(true, 101);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("retention_priority 101 is above 100"), std::string::npos);
}

TEST_F(PutAssemblyTest, BlockSplitOverChunksIsConcatenated) {
  PutAssembly put(cache_.get(), &transforms_, "");
  const std::string a = Bytes('a', kBlock);
  ASSERT_TRUE(put.Add({hex_, "k1", "", kBlock, a.substr(0, 100)}).ok());
  ASSERT_TRUE(put.Add({"", "", "", 0, a.substr(100, 300)}).ok());
  // A later chunk may repeat the namespace.
  ASSERT_TRUE(put.Add({hex_, "", "", 0, a.substr(400)}).ok());
  absl::StatusOr<PutResult> r = put.Commit();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->blocks_stored, 1u);
  EXPECT_EQ(r->bytes_stored, kBlock);
  EXPECT_EQ(Stored(plain_, "k1"), a);
}

TEST_F(PutAssemblyTest, NothingIsStoredUntilCommit) {
  {
    PutAssembly put(cache_.get(), &transforms_, "");
    ASSERT_TRUE(put.Add({hex_, "k1", "", 4, "abcd"}).ok());
  }  // dropped, as after an error or a cancelled stream
  absl::StatusOr<LookupResult> l = cache_->Lookup(plain_, {Key("k1")}, false, absl::ZeroDuration());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_TRUE(l->blocks.empty());
}

TEST_F(PutAssemblyTest, EmptyStreamIsRefusedAtCommit) {
  PutAssembly put(cache_.get(), &transforms_, "");
  EXPECT_EQ(put.Commit().status(), absl::InvalidArgumentError("Put carried no blocks"));
}

TEST_F(PutAssemblyTest, FirstChunkNeedsANamespace) {
  PutAssembly put(cache_.get(), &transforms_, "");
  EXPECT_EQ(put.Add({"", "k1", "", 4, "abcd"}),
            absl::InvalidArgumentError("namespace_id is required"));
}

TEST_F(PutAssemblyTest, NamespaceOfAnotherTenantIsNotFoundAsCheckTenantSays) {
  const NamespaceId alpha = Open("alpha-model", "alpha", "");
  PutAssembly put(cache_.get(), &transforms_, "beta");
  const absl::Status want = cache_->CheckTenant(alpha, "beta");
  ASSERT_EQ(want.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(put.Add({alpha.ToHex(), "k1", "", 4, "abcd"}), want);
}

TEST_F(PutAssemblyTest, ChunksOfTwoNamespacesAreRefused) {
  const NamespaceId other = Open("other", "", "");
  PutAssembly put(cache_.get(), &transforms_, "");
  ASSERT_TRUE(put.Add({hex_, "k1", "", 4, "abcd"}).ok());
  EXPECT_EQ(put.Add({other.ToHex(), "k2", "k1", 4, "efgh"}),
            absl::InvalidArgumentError("chunk 1: all blocks of one Put must share a namespace"));
}

TEST_F(PutAssemblyTest, ChunkAboveTheBlockSizeIsRefused) {
  PutAssembly put(cache_.get(), &transforms_, "");
  EXPECT_EQ(put.Add({hex_, "k1", "", kBlock, Bytes('a', kBlock + 1)}),
            absl::InvalidArgumentError(
                "chunk 0 carries 513 bytes, more than the namespace's block size of 512"));
}

TEST_F(PutAssemblyTest, BlockWithoutBlockBytesIsRefused) {
  PutAssembly put(cache_.get(), &transforms_, "");
  EXPECT_EQ(put.Add({hex_, "k1", "", 0, "abcd"}),
            absl::InvalidArgumentError(
                absl::StrCat("chunk 0 starts block ", Key("k1").ToHex(), " without block_bytes")));
}

TEST_F(PutAssemblyTest, ParentOrSizeWithoutKeyIsRefused) {
  PutAssembly put(cache_.get(), &transforms_, "");
  ASSERT_TRUE(put.Add({hex_, "k1", "", 8, "abcd"}).ok());
  EXPECT_EQ(
      put.Add({"", "", "", 4, "efgh"}),
      absl::InvalidArgumentError("chunk 1 sets parent_key, block_bytes or group without a key"));
  PutAssembly again(cache_.get(), &transforms_, "");
  ASSERT_TRUE(again.Add({hex_, "k1", "", 8, "abcd"}).ok());
  EXPECT_EQ(
      again.Add({"", "", "k0", 0, "efgh"}),
      absl::InvalidArgumentError("chunk 1 sets parent_key, block_bytes or group without a key"));
  PutAssembly grouped(cache_.get(), &transforms_, "");
  ASSERT_TRUE(grouped.Add({hex_, "k1", "", 8, "abcd"}).ok());
  EXPECT_EQ(
      grouped.Add({"", "", "", 0, "efgh", 1}),
      absl::InvalidArgumentError("chunk 1 sets parent_key, block_bytes or group without a key"));
}

TEST_F(PutAssemblyTest, MalformedKeysNameTheirField) {
  const std::string long_key(33, 'x');
  PutAssembly put(cache_.get(), &transforms_, "");
  absl::Status s = put.Add({hex_, long_key, "", 4, "abcd"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), absl::StrCat("key: ", BlockKey::Create(long_key).status().message()));
  PutAssembly parent(cache_.get(), &transforms_, "");
  s = parent.Add({hex_, "k1", long_key, 4, "abcd"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            absl::StrCat("parent_key: ", BlockKey::Create(long_key).status().message()));
}

TEST_F(PutAssemblyTest, BytesPastTheDeclaredSizeAreRefusedAsThePutBatchSays) {
  PutAssembly put(cache_.get(), &transforms_, "");
  ASSERT_TRUE(put.Add({hex_, "k1", "", 6, "abcd"}).ok());
  // The PutBatch's own refusal, unchanged.
  absl::StatusOr<std::unique_ptr<BlockCache::PutBatch>> batch = cache_->BeginPut(plain_);
  ASSERT_TRUE(batch.ok());
  ASSERT_TRUE((*batch)->StartBlock(Key("k1"), BlockKey(), 6).ok());
  ASSERT_TRUE((*batch)
                  ->Append(absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>("abcd"), 4))
                  .ok());
  const absl::Status want =
      (*batch)->Append(absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>("efg"), 3));
  ASSERT_EQ(want.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(put.Add({"", "", "", 0, "efg"}), want);
}

TEST_F(PutAssemblyTest, AChunkInPiecesIsStoredInOrderAndCheckedWhole) {
  PutAssembly put(cache_.get(), &transforms_, "");
  const std::string a = Bytes('a', kBlock);
  const absl::string_view all(a);
  const absl::string_view first[] = {all.substr(0, 10), all.substr(10, 100), all.substr(110, 6)};
  ASSERT_TRUE(put.Add({hex_, "k1", "", kBlock, ChunkBytes(first)}).ok());
  // 10 bytes more than the block has room for, in two pieces: refused as
  // one chunk of their total, before either piece is copied.
  const std::string over = Bytes('o', kBlock - 116 + 10);
  const absl::string_view rest[] = {absl::string_view(over).substr(0, 4),
                                    absl::string_view(over).substr(4)};
  const absl::Status s = put.Add({"", "", "", 0, ChunkBytes(rest)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(absl::StrCat("chunk of ", over.size(), " bytes overruns")),
            std::string::npos)
      << s;

  PutAssembly again(cache_.get(), &transforms_, "");
  ASSERT_TRUE(again.Add({hex_, "k1", "", kBlock, ChunkBytes(first)}).ok());
  const absl::string_view tail[] = {all.substr(116, 1), all.substr(117)};
  ASSERT_TRUE(again.Add({"", "", "", 0, ChunkBytes(tail)}).ok());
  ASSERT_TRUE(again.Commit().ok());
  EXPECT_EQ(Stored(plain_, "k1"), a);
}

TEST_F(PutAssemblyTest, EncodedBlocksAreCollectedWholeThenEncoded) {
  const NamespaceId enc = Open("fp8", "", "fp8-e4m3/vllm-nhd/g16");
  ASSERT_NE(transform_, nullptr);
  PutAssembly put(cache_.get(), &transforms_, "");
  const std::string a(kBlock, '\0');  // bf16 zeros encode exactly
  ASSERT_TRUE(put.Add({enc.ToHex(), "k1", "", kBlock, a.substr(0, 200)}).ok());
  ASSERT_TRUE(put.Add({"", "", "", 0, a.substr(200)}).ok());
  absl::StatusOr<PutResult> r = put.Commit();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->blocks_stored, 1u);
  EXPECT_EQ(r->bytes_stored, transform_->stored_bytes());
  std::vector<uint8_t> want(transform_->stored_bytes());
  ASSERT_TRUE(
      transform_
          ->Encode(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(a.data()), a.size()),
                   absl::MakeSpan(want))
          .ok());
  EXPECT_EQ(Stored(enc, "k1"), std::string(want.begin(), want.end()));
}

TEST_F(PutAssemblyTest, EncodedBlockOfAnotherSizeIsRefused) {
  const NamespaceId enc = Open("fp8", "", "fp8-e4m3/vllm-nhd/g16");
  PutAssembly put(cache_.get(), &transforms_, "");
  EXPECT_EQ(put.Add({enc.ToHex(), "k1", "", 100, "abcd"}),
            absl::InvalidArgumentError(
                absl::StrCat("block ", Key("k1").ToHex(), ": 100 bytes; this namespace stores ",
                             transform_->Describe(), ", which takes whole blocks of 512")));
}

TEST_F(PutAssemblyTest, EncodedDataWithoutABlockIsRefused) {
  const NamespaceId enc = Open("fp8", "", "fp8-e4m3/vllm-nhd/g16");
  PutAssembly put(cache_.get(), &transforms_, "");
  EXPECT_EQ(put.Add({enc.ToHex(), "", "", 0, "abcd"}),
            absl::InvalidArgumentError("chunk 0 has data but no block"));
}

TEST_F(PutAssemblyTest, EncodedBlockOverflowIsRefused) {
  const NamespaceId enc = Open("fp8", "", "fp8-e4m3/vllm-nhd/g16");
  PutAssembly put(cache_.get(), &transforms_, "");
  ASSERT_TRUE(put.Add({enc.ToHex(), "k1", "", kBlock, Bytes('a', 300)}).ok());
  EXPECT_EQ(put.Add({"", "", "", 0, Bytes('a', 300)}),
            absl::InvalidArgumentError(
                absl::StrCat("chunk 1: block ", Key("k1").ToHex(), " overflows its 512 bytes")));
}

TEST_F(PutAssemblyTest, EncodedBlockCutShortIsRefused) {
  const NamespaceId enc = Open("fp8", "", "fp8-e4m3/vllm-nhd/g16");
  const std::string msg = absl::StrCat("block ", Key("k1").ToHex(), " got 300 of its 512 bytes");
  PutAssembly at_commit(cache_.get(), &transforms_, "");
  ASSERT_TRUE(at_commit.Add({enc.ToHex(), "k1", "", kBlock, Bytes('a', 300)}).ok());
  EXPECT_EQ(at_commit.Commit().status(), absl::InvalidArgumentError(msg));
  // Or when the next block starts.
  PutAssembly at_next(cache_.get(), &transforms_, "");
  ASSERT_TRUE(at_next.Add({enc.ToHex(), "k1", "", kBlock, Bytes('a', 300)}).ok());
  EXPECT_EQ(at_next.Add({"", "k2", "k1", kBlock, ""}), absl::InvalidArgumentError(msg));
}

}  // namespace
}  // namespace kvtier
