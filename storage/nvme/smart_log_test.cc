#include "storage/nvme/smart_log.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvtier {
namespace {

TEST(SmartLogTest, ParsesPercentageUsedAndDataUnitsWritten) {
  std::vector<uint8_t> page(512, 0);
  page[5] = 7;  // 7% of rated life used
  // 1,234,567 data units written (thousands of 512-byte units).
  const uint64_t units = 1234567;
  for (int i = 0; i < 8; ++i) page[48 + i] = static_cast<uint8_t>(units >> (8 * i));
  auto h = ParseSmartLog(page);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->available);
  EXPECT_EQ(h->percentage_used, 7u);
  EXPECT_EQ(h->data_units_written_bytes, units * 512000);
  page[63] = 0xff;  // absurdly large: saturates
  EXPECT_EQ(ParseSmartLog(page)->data_units_written_bytes, UINT64_MAX);
  EXPECT_EQ(ParseSmartLog(absl::MakeConstSpan(page).subspan(0, 100)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SmartLogTest, ReadingExplainsWhyWhenUnavailable) {
  // Whatever /tmp is on here, the answer is either a SMART reading or a reason.
  const SmartHealth h = ReadSmartHealth("/tmp");
  EXPECT_FALSE(h.detail.empty());
  if (!h.available) {
    EXPECT_TRUE(h.data_units_written_bytes == 0 && h.percentage_used == 0);
  }
  const SmartHealth missing = ReadSmartHealth("/nonexistent/kvtier");
  EXPECT_FALSE(missing.available);
  EXPECT_NE(missing.detail.find("cannot stat"), std::string::npos) << missing.detail;
}

}  // namespace
}  // namespace kvtier
