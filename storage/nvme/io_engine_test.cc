#include "storage/nvme/io_engine.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "storage/nvme/uring/uring_io_engine.h"

namespace kvtier {
namespace {

struct AlignedBuffer {
  explicit AlignedBuffer(size_t n) : size(n) {
    data = static_cast<uint8_t*>(std::aligned_alloc(kIoAlignment, n));
  }
  ~AlignedBuffer() { std::free(data); }
  uint8_t* data;
  size_t size;
};

// Runs each test against every engine this build and kernel offer.
class IoEngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "io_uring") {
      auto e = CreateUringIoEngine(8);
      if (!e.ok()) GTEST_SKIP() << "io_uring not available here: " << e.status();
      engine_ = std::move(*e);
    } else {
      engine_ = CreatePosixIoEngine();
    }
    char path[] = "/tmp/kvtier-io-XXXXXX";
    const int tmp = mkstemp(path);
    ASSERT_GE(tmp, 0);
    close(tmp);
    path_ = path;
    fd_ = open(path, O_RDWR | O_DIRECT);
    ASSERT_GE(fd_, 0) << "O_DIRECT open: " << std::strerror(errno);
    ASSERT_EQ(fallocate(fd_, 0, 0, 1 << 20), 0);
    file_ = *engine_->RegisterFile(fd_);
  }
  void TearDown() override {
    engine_.reset();
    if (fd_ >= 0) close(fd_);
    if (!path_.empty()) unlink(path_.c_str());
  }

  std::unique_ptr<IoEngine> engine_;
  std::string path_;
  int fd_ = -1;
  int file_ = -1;
};

TEST_P(IoEngineTest, BatchedWritesReadBackExactly) {
  EXPECT_EQ(engine_->name(), GetParam());
  constexpr int kOps = 40;  // more than the io_uring queue depth of 8
  constexpr uint64_t kLen = 16384;
  AlignedBuffer out(kOps * kLen), in(kOps * kLen);
  for (size_t i = 0; i < out.size; ++i) out.data[i] = static_cast<uint8_t>(i * 31 + 7);
  std::memset(in.data, 0, in.size);
  std::vector<IoOp> writes, reads;
  for (int i = 0; i < kOps; ++i) {
    // Scatter: op i goes to slot (i * 7) % kOps.
    const uint64_t off = static_cast<uint64_t>((i * 7) % kOps) * kLen;
    writes.push_back({IoOp::Kind::kWrite, file_, off, out.data + i * kLen, kLen, -1});
    reads.push_back({IoOp::Kind::kRead, file_, off, in.data + i * kLen, kLen, -1});
  }
  for (const absl::Status& s : engine_->Run(writes)) ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(engine_->Sync(file_).ok());
  for (const absl::Status& s : engine_->Run(reads)) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(std::memcmp(out.data, in.data, out.size), 0);
}

TEST_P(IoEngineTest, VectoredOpsTransferBothSegmentsContiguously) {
  AlignedBuffer head(4096), body(3 * 4096), back_head(4096), back_body(3 * 4096), flat(4 * 4096);
  std::memset(head.data, 0x11, head.size);
  for (size_t i = 0; i < body.size; ++i) body.data[i] = static_cast<uint8_t>(i * 7);
  std::vector<IoOp> w = {
      {IoOp::Kind::kWrite, file_, 8192, head.data, head.size, -1, body.data, body.size}};
  ASSERT_TRUE(engine_->Run(w)[0].ok());
  // On disk: the first segment, then the second, from offset 8192.
  std::vector<IoOp> r = {{IoOp::Kind::kRead, file_, 8192, flat.data, flat.size, -1}};
  ASSERT_TRUE(engine_->Run(r)[0].ok());
  EXPECT_EQ(std::memcmp(flat.data, head.data, head.size), 0);
  EXPECT_EQ(std::memcmp(flat.data + head.size, body.data, body.size), 0);
  // And a vectored read splits them again.
  r = {{IoOp::Kind::kRead, file_, 8192, back_head.data, 4096, -1, back_body.data, body.size}};
  ASSERT_TRUE(engine_->Run(r)[0].ok());
  EXPECT_EQ(std::memcmp(back_head.data, head.data, 4096), 0);
  EXPECT_EQ(std::memcmp(back_body.data, body.data, body.size), 0);
}

TEST_P(IoEngineTest, RegisteredBuffersWork) {
  AlignedBuffer buf(1 << 16);
  auto index = engine_->RegisterBuffers({absl::Span<uint8_t>(buf.data, buf.size)});
  ASSERT_TRUE(index.ok()) << index.status();
  std::memset(buf.data, 0xab, 8192);
  std::vector<IoOp> w = {{IoOp::Kind::kWrite, file_, 4096, buf.data, 8192, *index}};
  ASSERT_TRUE(engine_->Run(w)[0].ok());
  std::memset(buf.data + 8192, 0, 8192);
  std::vector<IoOp> r = {{IoOp::Kind::kRead, file_, 4096, buf.data + 8192, 8192, *index}};
  ASSERT_TRUE(engine_->Run(r)[0].ok());
  EXPECT_EQ(std::memcmp(buf.data, buf.data + 8192, 8192), 0);
}

TEST_P(IoEngineTest, ErrorsArePerOperation) {
  AlignedBuffer buf(8192);
  std::vector<IoOp> ops = {
      {IoOp::Kind::kRead, file_, 0, buf.data, 4096, -1},        // fine
      {IoOp::Kind::kRead, file_, 1 << 20, buf.data, 4096, -1},  // at end of file
      {IoOp::Kind::kRead, 99, 0, buf.data + 4096, 4096, -1},    // unknown file
  };
  std::vector<absl::Status> s = engine_->Run(ops);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_TRUE(s[0].ok()) << s[0];
  EXPECT_EQ(s[1].code(), absl::StatusCode::kOutOfRange) << s[1];
  EXPECT_EQ(s[2].code(), absl::StatusCode::kInvalidArgument) << s[2];
  EXPECT_EQ(engine_->Sync(42).code(), absl::StatusCode::kInvalidArgument);
}

// RunNotifying tells each op's final status once, the one it returns, for
// ops that fail before the ring, at the ring, and beyond the queue depth.
TEST_P(IoEngineTest, RunNotifyingReportsEachOpOnceWithItsStatus) {
  constexpr int kOps = 20;  // more than the io_uring queue depth of 8
  AlignedBuffer buf(kOps * 4096);
  std::memset(buf.data, 0x5c, buf.size);
  std::vector<IoOp> ops;
  for (int i = 0; i < kOps; ++i) {
    ops.push_back({IoOp::Kind::kWrite, file_, static_cast<uint64_t>(i) * 4096, buf.data + i * 4096,
                   4096, -1});
  }
  ops[3].file = 99;                                                             // unknown file
  ops[7] = {IoOp::Kind::kRead, file_, 1 << 20, buf.data + 7 * 4096, 4096, -1};  // at end of file
  std::vector<int> calls(kOps, 0);
  std::vector<absl::Status> told(kOps);
  std::vector<absl::Status> s =
      engine_->RunNotifying(ops, [&](size_t op, const absl::Status& status) {
        ASSERT_LT(op, ops.size());
        ++calls[op];
        told[op] = status;
      });
  ASSERT_EQ(s.size(), ops.size());
  for (int i = 0; i < kOps; ++i) {
    EXPECT_EQ(calls[i], 1) << i;
    EXPECT_EQ(told[i], s[i]) << i;
  }
  EXPECT_EQ(s[3].code(), absl::StatusCode::kInvalidArgument) << s[3];
  EXPECT_EQ(s[7].code(), absl::StatusCode::kOutOfRange) << s[7];
  EXPECT_TRUE(s[0].ok()) << s[0];
  EXPECT_TRUE(s[kOps - 1].ok()) << s[kOps - 1];
}

TEST_P(IoEngineTest, UnregisteredFileIsRefusedAndOthersKeepTheirIndex) {
  const int second_fd = open(path_.c_str(), O_RDWR | O_DIRECT);
  ASSERT_GE(second_fd, 0);
  const int second = *engine_->RegisterFile(second_fd);
  EXPECT_NE(second, file_);
  ASSERT_TRUE(engine_->UnregisterFile(file_).ok());
  EXPECT_EQ(engine_->UnregisterFile(file_).code(), absl::StatusCode::kInvalidArgument);
  AlignedBuffer buf(4096);
  std::vector<IoOp> ops = {{IoOp::Kind::kRead, file_, 0, buf.data, 4096, -1},
                           {IoOp::Kind::kRead, second, 0, buf.data, 4096, -1}};
  std::vector<absl::Status> s = engine_->Run(ops);
  EXPECT_EQ(s[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(s[1].ok()) << s[1];
  // A file registered after an unregistration still works.
  const int third_fd = open(path_.c_str(), O_RDWR | O_DIRECT);
  const int third = *engine_->RegisterFile(third_fd);
  ops = {{IoOp::Kind::kRead, third, 0, buf.data, 4096, -1}};
  EXPECT_TRUE(engine_->Run(ops)[0].ok());
  engine_->UnregisterFile(second).IgnoreError();
  engine_->UnregisterFile(third).IgnoreError();
  close(second_fd);
  close(third_fd);
}

INSTANTIATE_TEST_SUITE_P(Engines, IoEngineTest, ::testing::Values("pread", "io_uring"),
                         [](const auto& info) {
                           return info.param == "io_uring" ? "Uring" : "Pread";
                         });

TEST(CreateIoEngineTest, ChoosesAndExplains) {
  std::string note;
  auto e = CreateIoEngine({"pread", 32}, &note);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->name(), "pread");
  e = CreateIoEngine({"auto", 32}, &note);
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(note.empty());
  if ((*e)->name() == "pread") {
    EXPECT_NE(note.find("io_uring unavailable"), std::string::npos) << note;
  } else {
    EXPECT_EQ((*e)->capabilities().queue_depth, 32u);
  }
  EXPECT_EQ(CreateIoEngine({"spdk", 32}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateIoEngine({"auto", 0}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvtier
