#include "storage/nvme/smart_log.h"

#include <fcntl.h>
#include <linux/nvme_ioctl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kvtier {

absl::StatusOr<SmartHealth> ParseSmartLog(absl::Span<const uint8_t> page) {
  if (page.size() < 512) {
    return absl::InvalidArgumentError(
        absl::StrCat("SMART log page is ", page.size(), " bytes, not 512"));
  }
  SmartHealth h;
  h.available = true;
  h.percentage_used = page[5];
  // Bytes 48..63: data units written, a 128-bit little-endian count of
  // thousands of 512-byte units. Saturate above 64 bits of bytes.
  unsigned __int128 units = 0;
  for (int i = 15; i >= 0; --i) units = (units << 8) | page[48 + i];
  h.data_units_written_bytes =
      units > UINT64_MAX / 512000 ? UINT64_MAX : static_cast<uint64_t>(units) * 512000;
  return h;
}

SmartHealth ReadSmartHealth(const std::string& dir) {
  SmartHealth none;
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    none.detail = absl::StrCat("cannot stat '", dir, "': ", std::strerror(errno));
    return none;
  }
  std::error_code ec;
  const std::filesystem::path sys =
      absl::StrCat("/sys/dev/block/", major(st.st_dev), ":", minor(st.st_dev));
  const std::string name = std::filesystem::canonical(sys, ec).filename().string();
  if (ec || name.empty()) {
    none.detail = absl::StrCat("'", dir, "' is not on a block device");
    return none;
  }
  if (!absl::StartsWith(name, "nvme")) {
    none.detail = absl::StrCat("'", dir, "' is on ", name, ", not an NVMe device");
    return none;
  }
  // nvme0n1p2 -> controller /dev/nvme0.
  const std::string ctrl = "/dev/" + name.substr(0, name.find('n', 4));
  const int fd = open(ctrl.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    none.detail = absl::StrCat("cannot open ", ctrl, ": ", std::strerror(errno));
    return none;
  }
  uint8_t page[512] = {};
  nvme_admin_cmd cmd{};
  cmd.opcode = 0x02;  // Get Log Page
  cmd.nsid = 0xffffffff;
  cmd.addr = reinterpret_cast<uint64_t>(page);
  cmd.data_len = sizeof(page);
  cmd.cdw10 = ((sizeof(page) / 4 - 1) << 16) | 0x02;  // NUMDL, log id 2
  const int rc = ioctl(fd, NVME_IOCTL_ADMIN_CMD, &cmd);
  const int err = errno;
  close(fd);
  if (rc != 0) {
    none.detail = absl::StrCat("SMART log of ", ctrl, ": ",
                               rc < 0 ? std::strerror(err) : absl::StrCat("NVMe status ", rc));
    return none;
  }
  absl::StatusOr<SmartHealth> h = ParseSmartLog(page);
  if (!h.ok()) {
    none.detail = std::string(h.status().message());
    return none;
  }
  h->detail = ctrl;
  return *h;
}

}  // namespace kvtier
