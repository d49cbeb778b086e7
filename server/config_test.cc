#include "server/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace kvtier {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(ConfigTest, DefaultsAreValidAndHostTierIsBounded) {
  DaemonConfig small = DefaultConfig(4 * kGiB);
  EXPECT_EQ(small.host_tier_bytes, 1 * kGiB);  // 25% of RAM
  DaemonConfig big = DefaultConfig(1024 * kGiB);
  EXPECT_EQ(big.host_tier_bytes, 8 * kGiB);  // capped
  DaemonConfig tiny = DefaultConfig(100 << 20);
  EXPECT_EQ(tiny.host_tier_bytes, tiny.host_slab_bytes);  // at least one slab
  EXPECT_EQ(small.listen, "127.0.0.1:50051");
  EXPECT_TRUE(ValidateConfig(small).ok());
  EXPECT_TRUE(ValidateConfig(DefaultConfig(PhysicalMemoryBytes())).ok());
}

TEST(ConfigTest, ParseBytes) {
  EXPECT_EQ(*ParseBytes("4096"), 4096u);
  EXPECT_EQ(*ParseBytes("64KiB"), 65536u);
  EXPECT_EQ(*ParseBytes(" 8 GiB "), 8 * kGiB);
  EXPECT_EQ(*ParseBytes("1TiB"), 1024 * kGiB);
  EXPECT_FALSE(ParseBytes("8GB").ok());
  EXPECT_FALSE(ParseBytes("-1").ok());
  EXPECT_FALSE(ParseBytes("lots").ok());
  EXPECT_FALSE(ParseBytes("99999999999999TiB").ok());  // overflow
}

TEST(ConfigTest, YamlOverridesDefaultsAndFlagsOverrideYaml) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  ASSERT_TRUE(ApplyYaml(R"(
server:
  listen: unix:/tmp/kvtier.sock
host_tier:
  bytes: 2GiB
leases:
  default_ttl_ms: 1500
log:
  level: debug
)",
                        &c)
                  .ok());
  EXPECT_EQ(c.listen, "unix:/tmp/kvtier.sock");
  EXPECT_EQ(c.host_tier_bytes, 2 * kGiB);
  EXPECT_EQ(c.default_lease_ttl_ms, 1500u);
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.max_namespaces, 1024u);  // untouched keys keep defaults
  ASSERT_TRUE(SetConfigAssignment("host_tier.bytes=1GiB", &c).ok());
  EXPECT_EQ(c.host_tier_bytes, 1 * kGiB);
  EXPECT_TRUE(ValidateConfig(c).ok());
}

TEST(ConfigTest, UnknownKeyIsAnErrorNamingTheKeyAndChangesNothing) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  const std::string before = ConfigToYaml(c);
  absl::Status s = ApplyYaml("host_tier:\n  bytes: 1GiB\n  bytez: 2GiB\n", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'host_tier.bytez'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("line 3"), std::string::npos) << s;
  EXPECT_EQ(ConfigToYaml(c), before);  // the valid first key was not applied either
  s = SetConfigAssignment("nope=1", &c);
  EXPECT_NE(s.message().find("'nope'"), std::string::npos) << s;
  EXPECT_FALSE(SetConfigAssignment("server.listen", &c).ok());  // no '='
}

TEST(ConfigTest, MalformedYamlAndBadValuesAreErrors) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  EXPECT_EQ(ApplyYaml("server: [unclosed", &c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyYaml("- a\n- b\n", &c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyYaml("server:\n  listen: [a, b]\n", &c).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status s = ApplyYaml("limits:\n  max_namespaces: many\n", &c);
  EXPECT_NE(s.message().find("limits.max_namespaces"), std::string::npos) << s;
  EXPECT_TRUE(ApplyYaml("", &c).ok());  // an empty file changes nothing
  EXPECT_EQ(ApplyYamlFile("/nonexistent/kvtier.yaml", &c).code(), absl::StatusCode::kNotFound);
}

// Regression (tests/fuzz/config_fuzz found it): a value with carriage
// returns applied, then printed as YAML that read back differently. Control
// characters are refused, naming the key; other odd but printable values
// round-trip.
TEST(ConfigTest, ControlCharactersAreRefusedAndOddValuesRoundTrip) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  const absl::Status s =
      ApplyYaml("nvme:\n  dirs: /dcostmodecostmodel.gpu\r\r\r\r\r\r\r\r\r\r", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("nvme.dirs"), std::string::npos) << s;
  EXPECT_EQ(ApplyYaml("server:\n  listen: \"a\\tb\"\n", &c).code(),
            absl::StatusCode::kInvalidArgument);
  for (const char* odd : {"' leading space'", "'trailing space '", "'a: b'", "'#x'", "\"q'uote\"",
                          "'{x}'", "'- y'"}) {
    DaemonConfig d = DefaultConfig(16 * kGiB);
    ASSERT_TRUE(ApplyYaml(absl::StrCat("nvme:\n  dirs: ", odd, "\n"), &d).ok()) << odd;
    const std::string printed = ConfigToYaml(d);
    DaemonConfig e = DefaultConfig(64 * kGiB);
    ASSERT_TRUE(ApplyYaml(printed, &e).ok()) << printed;
    EXPECT_EQ(e.nvme_dirs, d.nvme_dirs) << odd;
    EXPECT_EQ(ConfigToYaml(e), printed) << odd;
  }
}

TEST(ConfigTest, ValidationCatchesInconsistentSizes) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  c.max_block_bytes = c.host_slab_bytes + 1;
  EXPECT_FALSE(ValidateConfig(c).ok());
  c = DefaultConfig(16 * kGiB);
  c.host_tier_bytes = c.host_slab_bytes - 4096;
  EXPECT_FALSE(ValidateConfig(c).ok());
  c = DefaultConfig(16 * kGiB);
  c.default_lease_ttl_ms = c.max_lease_ttl_ms + 1;
  EXPECT_FALSE(ValidateConfig(c).ok());
  c = DefaultConfig(16 * kGiB);
  c.log_level = "loud";
  EXPECT_FALSE(ValidateConfig(c).ok());
  c = DefaultConfig(16 * kGiB);
  c.get_chunk_bytes = c.max_message_bytes;
  EXPECT_FALSE(ValidateConfig(c).ok());
  // gpu.tier: auto, off, or a size holding at least one slot.
  for (const char* ok : {"auto", "off", "8GiB", "4MiB"}) {
    c = DefaultConfig(16 * kGiB);
    c.gpu_tier = ok;
    EXPECT_TRUE(ValidateConfig(c).ok()) << ok;
  }
  for (const char* bad : {"lots", "1MiB", ""}) {
    c = DefaultConfig(16 * kGiB);
    c.gpu_tier = bad;
    const absl::Status s = ValidateConfig(c);
    EXPECT_NE(s.message().find("gpu.tier"), std::string::npos) << bad << ": " << s;
  }
}

TEST(ConfigTest, PrintedYamlReadsBackIdentically) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  c.listen = "127.0.0.1:6000";
  c.host_tier_bytes = 3 * kGiB;
  const std::string yaml = ConfigToYaml(c);
  DaemonConfig d = DefaultConfig(64 * kGiB);
  ASSERT_TRUE(ApplyYaml(yaml, &d).ok()) << yaml;
  EXPECT_EQ(ConfigToYaml(d), yaml);
  for (const std::string& key : ConfigKeys()) {
    const std::string leaf = key.substr(key.find('.') + 1);
    EXPECT_NE(yaml.find(leaf + ":"), std::string::npos) << key;
  }
}

}  // namespace
}  // namespace kvtier
