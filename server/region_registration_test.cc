#include "server/region_registration.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "testing/test_copy_engine.h"

namespace kvtier {
namespace {

// A tmpfs directory of this test's own, with a 4 KiB file in a tenant's
// directory and one at its top.
class RegionRegistrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat("/dev/shm/kvtier-region-registration-", ::getpid());
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(std::filesystem::create_directories(dir_ + "/alpha"));
    alpha_file_ = dir_ + "/alpha/kv";
    top_file_ = dir_ + "/kv";
    for (const std::string& f : {alpha_file_, top_file_}) {
      const int fd = ::open(f.c_str(), O_CREAT | O_RDWR | O_EXCL, 0600);
      ASSERT_GE(fd, 0) << f;
      ASSERT_EQ(::ftruncate(fd, 4096), 0);
      ::close(fd);
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  RegionRegistration Registration(bool per_tenant, CopyEngine* engine = nullptr,
                                  CudaIpcOpener opener = nullptr) {
    return RegionRegistration({dir_, per_tenant, engine, std::move(opener)});
  }

  static RegionRequest Shm(const std::string& tenant, const std::string& path,
                           uint32_t owner_pid = 0) {
    RegionRequest r;
    r.tenant = tenant;
    r.owner_pid = owner_pid;
    r.kind = RegionRequest::Kind::kSharedMemory;
    r.shm_path = path;
    r.shm_size_bytes = 4096;
    return r;
  }

  static RegionRequest Cuda(int device) {
    RegionRequest r;
    r.tenant = "alpha";
    r.kind = RegionRequest::Kind::kCudaIpc;
    r.cuda_ipc.device = device;
    // Filled in place: GCC 12 at -O3 reports a false -Warray-bounds on the
    // moved temporary of push_back({std::string(...), ...}).
    CudaIpcTensorSpec& tensor = r.cuda_ipc.tensors.emplace_back();
    tensor.handle.assign(kCudaIpcHandleBytes, 'h');
    tensor.size = 1024;
    return r;
  }

  std::string dir_, alpha_file_, top_file_;
};

TEST_F(RegionRegistrationTest, OwnerPidMustBeAProcessId) {
  RegionRequest r = Shm("alpha", alpha_file_, 0x80000000u);
  EXPECT_EQ(Registration(true).Open(r).status(),
            absl::InvalidArgumentError("owner_pid is not a process id"));
}

TEST_F(RegionRegistrationTest, RequestMustNameAKind) {
  RegionRequest r;
  r.tenant = "alpha";
  EXPECT_EQ(Registration(true).Open(r).status(),
            absl::InvalidArgumentError("region must name a kind (shared_memory or cuda_ipc)"));
}

TEST_F(RegionRegistrationTest, PerTenantDirsConfineEachTenantToItsOwn) {
  const RegionRegistration reg = Registration(true);
  EXPECT_EQ(reg.AllowedShmDir("alpha"), dir_ + "/alpha");
  absl::StatusOr<std::unique_ptr<MemoryRegion>> mine = reg.Open(Shm("alpha", alpha_file_));
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ((*mine)->size(), 4096u);
  // Another tenant cannot name alpha's file, nor a file outside every
  // tenant's directory; the refusal is SharedMemoryRegion::Open's.
  EXPECT_EQ(reg.Open(Shm("beta", alpha_file_)).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(reg.Open(Shm("alpha", top_file_)).status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(RegionRegistrationTest, WithoutPerTenantDirsTheShmDirIsShared) {
  const RegionRegistration reg = Registration(false);
  EXPECT_EQ(reg.AllowedShmDir("alpha"), dir_);
  EXPECT_TRUE(reg.Open(Shm("alpha", top_file_)).ok());
  EXPECT_TRUE(reg.Open(Shm("beta", top_file_)).ok());
}

TEST_F(RegionRegistrationTest, OwnerMustMapTheFile) {
  const RegionRegistration reg = Registration(true);
  // Opening maps the file into this process, so this process is an owner.
  EXPECT_TRUE(reg.Open(Shm("alpha", alpha_file_, static_cast<uint32_t>(::getpid()))).ok());
  // pid 1 (this test's init, or the container's) does not map it.
  EXPECT_EQ(reg.Open(Shm("alpha", alpha_file_, 1)).status(),
            absl::InvalidArgumentError(
                absl::StrCat("owner_pid 1 does not map ", alpha_file_,
                             "; give the engine's pid as the daemon sees it, or 0")));
}

TEST_F(RegionRegistrationTest, CudaIpcSpecIsValidatedFirst) {
  RegionRequest r = Cuda(0);
  r.cuda_ipc.tensors.clear();
  EXPECT_EQ(Registration(true).Open(r).status(), ValidateCudaIpcSpec(r.cuda_ipc));
  EXPECT_EQ(Registration(true).Open(r).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RegionRegistrationTest, CudaIpcNeedsACopyEngineThatReachesDeviceMemory) {
  EXPECT_EQ(Registration(true).Open(Cuda(0)).status(),
            absl::FailedPreconditionError(
                "GPU memory cannot be registered: the copy engine is missing ()"));
}

TEST_F(RegionRegistrationTest, CudaIpcMustBeOnTheCopyEnginesGpu) {
  FakeDeviceEngine engine;  // copies on GPU 0
  EXPECT_EQ(
      Registration(true, &engine).Open(Cuda(1)).status(),
      absl::InvalidArgumentError("cuda_ipc.device 1: this daemon copies on GPU 0 (gpu.device)"));
}

TEST_F(RegionRegistrationTest, CudaIpcNeedsAnOpener) {
  FakeDeviceEngine engine;
  EXPECT_EQ(Registration(true, &engine).Open(Cuda(0)).status(),
            absl::FailedPreconditionError("CUDA IPC memory is not supported here"));
}

TEST_F(RegionRegistrationTest, CudaIpcOpenerGetsTheSpec) {
  FakeDeviceEngine engine;
  CudaIpcSpec seen;
  const RegionRegistration reg = Registration(true, &engine, [&seen](const CudaIpcSpec& spec) {
    seen = spec;
    return absl::StatusOr<std::unique_ptr<MemoryRegion>>(absl::UnavailableError("opener"));
  });
  EXPECT_EQ(reg.Open(Cuda(0)).status(), absl::UnavailableError("opener"));
  EXPECT_EQ(seen.device, 0);
  ASSERT_EQ(seen.tensors.size(), 1u);
  EXPECT_EQ(seen.tensors[0].size, 1024u);
}

}  // namespace
}  // namespace kvtier
