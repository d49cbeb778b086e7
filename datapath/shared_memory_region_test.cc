// SharedMemoryRegion: which files the daemon maps (owner-only, tmpfs, its
// writer's) and which it refuses.
#include "datapath/shared_memory_region.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace kvtier {
namespace {

class SharedMemoryRegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/dev/shm/kvtier-shm-XXXXXX";
    const int fd = mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    path_ = tmpl;
    ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
    close(fd);
    ASSERT_EQ(chmod(path_.c_str(), 0600), 0);
  }
  void TearDown() override { unlink(path_.c_str()); }
  std::string path_;
};

TEST_F(SharedMemoryRegionTest, MapsAnOwnerOnlyFileSharedWithItsWriter) {
  auto r = SharedMemoryRegion::Open(path_, 1 << 20);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->bytes().size(), 1u << 20);
  (*r)->bytes()[12345] = 0x5a;  // visible through the file
  const int fd = open(path_.c_str(), O_RDONLY);
  uint8_t b = 0;
  ASSERT_EQ(pread(fd, &b, 1, 12345), 1);
  close(fd);
  EXPECT_EQ(b, 0x5a);
}

TEST_F(SharedMemoryRegionTest, RefusesWhatItMustNotMap) {
  EXPECT_EQ(SharedMemoryRegion::Open("relative/path", 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SharedMemoryRegion::Open(path_, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SharedMemoryRegion::Open(path_, (1 << 20) + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SharedMemoryRegion::Open(path_ + ".none", 10).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(SharedMemoryRegion::Open("/tmp", 10).status().code(),
            absl::StatusCode::kPermissionDenied);  // not in the shared-memory directory
  EXPECT_EQ(SharedMemoryRegion::Open(path_, 10, "/tmp").status().code(),
            absl::StatusCode::kPermissionDenied);  // another allowed directory
  char dir_tmpl[] = "/dev/shm/kvtier-dir-XXXXXX";
  const std::string dir = mkdtemp(dir_tmpl);
  EXPECT_EQ(SharedMemoryRegion::Open(dir, 10).status().code(),
            absl::StatusCode::kInvalidArgument);  // not a regular file
  rmdir(dir.c_str());
  const std::string second = path_ + ".2";  // a second name for the same file
  ASSERT_EQ(link(path_.c_str(), second.c_str()), 0);
  EXPECT_EQ(SharedMemoryRegion::Open(path_, 10).status().code(),
            absl::StatusCode::kPermissionDenied);
  unlink(second.c_str());
  ASSERT_EQ(chmod(path_.c_str(), 0644), 0);
  absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> r = SharedMemoryRegion::Open(path_, 10);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("644"), std::string::npos) << r.status();
  ASSERT_EQ(chmod(path_.c_str(), 0600), 0);
  const std::string link = path_ + ".lnk";
  ASSERT_EQ(symlink(path_.c_str(), link.c_str()), 0);
  EXPECT_EQ(SharedMemoryRegion::Open(link, 10).status().code(),
            absl::StatusCode::kPermissionDenied);
  unlink(link.c_str());
}

TEST_F(SharedMemoryRegionTest, RefusesAnotherUsersFile) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another user";
  ASSERT_EQ(chown(path_.c_str(), 65534, 65534), 0);
  absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> r = SharedMemoryRegion::Open(path_, 10);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("owned by uid 65534"), std::string::npos) << r.status();
}

// A 0600 file of the daemon's user on a disk filesystem (its own catalog,
// say) must not be mappable even when the directory is allowed.
TEST_F(SharedMemoryRegionTest, RefusesFilesNotOnTmpfs) {
  char dir_tmpl[] = "/var/tmp/kvtier-disk-XXXXXX";
  const std::string dir = mkdtemp(dir_tmpl);
  const std::string file = dir + "/catalog";
  const int fd = open(file.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  close(fd);
  struct statfs fs;
  ASSERT_EQ(statfs(dir.c_str(), &fs), 0);
  absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> r = SharedMemoryRegion::Open(file, 10, dir);
  if (fs.f_type == TMPFS_MAGIC) {
    EXPECT_TRUE(r.ok()) << "/var/tmp is tmpfs here: " << r.status();
  } else {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_NE(r.status().message().find("tmpfs"), std::string::npos) << r.status();
  }
  unlink(file.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace kvtier
