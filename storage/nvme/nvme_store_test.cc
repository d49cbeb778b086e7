#include "storage/nvme/nvme_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/checksum.h"
#include "storage/nvme/uring/uring_io_engine.h"
#include "testing/faulty_io_engine.h"

namespace kvtier {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

struct Aligned {
  explicit Aligned(size_t n) : size(n) {
    data = static_cast<uint8_t*>(std::aligned_alloc(kIoAlignment, RoundUpToIo(n)));
  }
  ~Aligned() { std::free(data); }
  Aligned(const Aligned&) = delete;
  uint8_t* data;
  size_t size;
};

NamespaceId Ns() {
  NamespaceSpec s;
  s.model_id = "m";
  s.layout = KvLayout{1, 1, 128, DType::kBf16, 16, 0, 1};
  return NamespaceId::Of(s);
}

void Fill(uint8_t* p, size_t n, int seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(i * 131 + seed * 7 + (i >> 12));
}

// Every test runs on both engines.
class NvmeStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "io_uring") {
      auto e = CreateUringIoEngine(32);
      if (!e.ok()) GTEST_SKIP() << "io_uring not available here: " << e.status();
      base_ = std::move(*e);
    } else {
      base_ = CreatePosixIoEngine();
    }
    faulty_ = std::make_unique<FaultInjectingIoEngine>(base_.get(), FaultPlan{});
    char tmpl[] = "/tmp/kvtier-nvme-XXXXXX";
    root_ = mkdtemp(tmpl);
    options_.dirs = {root_ + "/dev0", root_ + "/dev1"};
    options_.bytes_per_dir = 8 * kMiB;
    options_.slab_bytes = 2 * kMiB;
    store_ = *NvmeStore::Open(options_, faulty_.get());
  }
  void TearDown() override {
    store_.reset();
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

  SlotHeader Header(int i, uint64_t bytes) {
    SlotHeader h;
    h.ns = Ns();
    h.key = *BlockKey::Create(absl::StrCat("k", i));
    if (i > 0) h.parent = *BlockKey::Create(absl::StrCat("k", i - 1));
    h.payload_bytes = bytes;
    return h;
  }

  // Writes block i with `bytes` of payload; returns its slot and header.
  std::pair<NvmeSlot, SlotHeader> WriteBlock(int i, uint64_t bytes) {
    Aligned buf(bytes);
    Fill(buf.data, bytes, i);
    SlotHeader h = Header(i, bytes);
    h.payload_checksum = Checksum64(absl::MakeConstSpan(buf.data, bytes));
    h.sequence = store_->NextSequence();
    NvmeSlot slot = *store_->Allocate(bytes);
    std::vector<NvmeWrite> w = {{slot, h, buf.data}};
    EXPECT_TRUE(store_->Write(w)[0].ok());
    return {slot, h};
  }

  absl::Status ReadBlock(const NvmeSlot& slot, const SlotHeader& h, int seed) {
    Aligned out(h.payload_bytes);
    std::vector<NvmeRead> r = {{slot, h, out.data}};
    absl::Status s = store_->Read(r)[0];
    if (s.ok()) {
      Aligned want(h.payload_bytes);
      Fill(want.data, h.payload_bytes, seed);
      EXPECT_EQ(std::memcmp(want.data, out.data, h.payload_bytes), 0);
    }
    return s;
  }

  std::unique_ptr<IoEngine> base_;
  std::unique_ptr<FaultInjectingIoEngine> faulty_;
  std::string root_;
  NvmeStoreOptions options_;
  std::unique_ptr<NvmeStore> store_;
};

TEST_P(NvmeStoreTest, BatchedWritesReadBackAcrossDevices) {
  constexpr int kBlocks = 24;
  std::vector<std::unique_ptr<Aligned>> bufs;
  std::vector<NvmeWrite> writes;
  for (int i = 0; i < kBlocks; ++i) {
    const uint64_t bytes = (i % 3 == 0) ? 256 * kKiB : 100 * kKiB + i;  // odd sizes too
    bufs.push_back(std::make_unique<Aligned>(bytes));
    Fill(bufs.back()->data, bytes, i);
    SlotHeader h = Header(i, bytes);
    h.payload_checksum = Checksum64(absl::MakeConstSpan(bufs.back()->data, bytes));
    h.sequence = store_->NextSequence();
    writes.push_back({*store_->Allocate(bytes), h, bufs.back()->data});
  }
  for (const absl::Status& s : store_->Write(writes)) ASSERT_TRUE(s.ok()) << s;
  for (int i = 0; i < kBlocks; ++i) {
    EXPECT_TRUE(ReadBlock(writes[i].slot, writes[i].header, i).ok()) << i;
  }
  auto stats = store_->Stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_GT(stats[0].used_bytes, 0u);  // both devices got blocks
  EXPECT_GT(stats[1].used_bytes, 0u);
  EXPECT_GT(stats[0].bytes_written + stats[1].bytes_written, 24 * 100 * kKiB);
}

TEST_P(NvmeStoreTest, SlotsSurviveReopenAndAreClaimed) {
  auto [slot, h] = WriteBlock(0, 300 * kKiB);
  auto [slot2, h2] = WriteBlock(1, 4 * kKiB);
  store_.reset();
  store_ = *NvmeStore::Open(options_, faulty_.get());
  ASSERT_TRUE(store_->Claim(slot, h.sequence).ok());
  ASSERT_TRUE(store_->Claim(slot2, h2.sequence).ok());
  EXPECT_GT(store_->NextSequence(), h2.sequence);
  EXPECT_EQ(store_->Claim(slot, h.sequence).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(ReadBlock(slot, h, 0).ok());
  EXPECT_TRUE(ReadBlock(slot2, h2, 1).ok());
}

TEST_P(NvmeStoreTest, CorruptTornStaleAndUnwrittenSlotsAreDataLoss) {
  auto [slot, h] = WriteBlock(0, 64 * kKiB);
  const std::string file = absl::StrCat(options_.dirs[slot.device], "/kvtier-slots.dat");
  // Flip one payload byte on disk behind the store's back.
  {
    int fd = open(file.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    uint8_t b = 0;
    const off_t at = static_cast<off_t>(slot.slot.offset + kSlotHeaderBytes + 5000);
    ASSERT_EQ(pread(fd, &b, 1, at), 1);
    b ^= 0x80;
    ASSERT_EQ(pwrite(fd, &b, 1, at), 1);
    close(fd);
  }
  absl::Status s = ReadBlock(slot, h, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s;
  // A stale expectation: the slot now holds another block (freed and reused).
  {
    Aligned other(64 * kKiB);
    Fill(other.data, other.size, 7);
    SlotHeader h7 = Header(7, other.size);
    h7.payload_checksum = Checksum64(absl::MakeConstSpan(other.data, other.size));
    h7.sequence = store_->NextSequence();
    std::vector<NvmeWrite> w = {{slot, h7, other.data}};
    ASSERT_TRUE(store_->Write(w)[0].ok());
    s = ReadBlock(slot, h, 0);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(s.message().find("not block"), std::string::npos) << s;
    EXPECT_TRUE(ReadBlock(slot, h7, 7).ok());
  }
  // A slot never written reads zeros: no header.
  NvmeSlot fresh = *store_->Allocate(64 * kKiB);
  EXPECT_EQ(ReadBlock(fresh, Header(9, 64 * kKiB), 9).code(), absl::StatusCode::kDataLoss);
  // A torn write reports success but the payload never fully lands.
  faulty_->SetPlan(FaultPlan{0, 0, 1.0, 0, 5});
  auto [torn, h3] = WriteBlock(3, 64 * kKiB);
  faulty_->SetPlan(FaultPlan{});
  EXPECT_GT(faulty_->counts().torn_writes, 0u);
  EXPECT_EQ(ReadBlock(torn, h3, 3).code(), absl::StatusCode::kDataLoss);
}

TEST_P(NvmeStoreTest, IoErrorsAreReportedAndTheStoreRecovers) {
  Aligned buf(64 * kKiB);
  Fill(buf.data, buf.size, 1);
  SlotHeader h = Header(1, buf.size);
  h.payload_checksum = Checksum64(absl::MakeConstSpan(buf.data, buf.size));
  h.sequence = store_->NextSequence();
  NvmeSlot slot = *store_->Allocate(buf.size);
  std::vector<NvmeWrite> w = {{slot, h, buf.data}};
  faulty_->SetPlan(FaultPlan{1.0, 0, 0, 0, 1});
  EXPECT_EQ(store_->Write(w)[0].code(), absl::StatusCode::kDataLoss);  // EIO
  faulty_->SetPlan(FaultPlan{0, 1.0, 0, 0, 1});
  EXPECT_EQ(store_->Write(w)[0].code(), absl::StatusCode::kResourceExhausted);  // ENOSPC
  faulty_->SetPlan(FaultPlan{0, 0, 0, 1.0, 1});
  EXPECT_EQ(store_->Write(w)[0].code(), absl::StatusCode::kDataLoss);  // fdatasync EIO
  faulty_->SetPlan(FaultPlan{});  // faults stop: the same slot works again
  EXPECT_TRUE(store_->Write(w)[0].ok());
  EXPECT_TRUE(ReadBlock(slot, h, 1).ok());
}

TEST_P(NvmeStoreTest, FullTierIsResourceExhausted) {
  // 2 devices x 8 MiB; 1 MiB payloads take 2 MiB slots (header + 1 MiB > 1 MiB class).
  int stored = 0;
  while (store_->Allocate(1 * kMiB).ok()) ++stored;
  EXPECT_GT(stored, 0);
  EXPECT_EQ(store_->Allocate(1 * kMiB).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(store_->Allocate(3 * kMiB).ok());  // larger than a slab
}

INSTANTIATE_TEST_SUITE_P(Engines, NvmeStoreTest, ::testing::Values("pread", "io_uring"),
                         [](const auto& info) {
                           return info.param == "io_uring" ? "Uring" : "Pread";
                         });

TEST(NvmeStoreOpenTest, BadDirectoryIsUnavailable) {
  auto engine = CreatePosixIoEngine();
  NvmeStoreOptions o;
  o.dirs = {"/proc/kvtier-cannot-exist"};
  o.bytes_per_dir = 8 * kMiB;
  o.slab_bytes = 2 * kMiB;
  EXPECT_EQ(NvmeStore::Open(o, engine.get()).status().code(), absl::StatusCode::kUnavailable);
  o.dirs.clear();
  EXPECT_EQ(NvmeStore::Open(o, engine.get()).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvtier
