#include "server/config.h"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/config_validation.h"

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

TEST(ConfigTest, EvictionPolicyIsValueByDefaultAndLruOnRequest) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  EXPECT_EQ(c.eviction_policy, "value");
  ASSERT_TRUE(ApplyYaml("cache:\n  eviction_policy: lru\n", &c).ok());
  EXPECT_EQ(c.eviction_policy, "lru");
  EXPECT_TRUE(ValidateConfig(c).ok());
  ASSERT_TRUE(ApplyYaml("cache:\n  eviction_policy: lfu\n", &c).ok());
  const absl::Status s = ValidateConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cache.eviction_policy must be value or lru"), std::string::npos) << s;
}

// A boolean key of `section`: its default, the other value applied, and a
// value that is not a boolean refused naming the key, changing nothing.
void ExpectBooleanKey(const std::string& section, const std::string& key, bool DaemonConfig::*field,
                      bool default_value) {
  SCOPED_TRACE(section + "." + key);
  DaemonConfig c = DefaultConfig(16 * kGiB);
  EXPECT_EQ(c.*field, default_value);
  ASSERT_TRUE(
      ApplyYaml(section + ":\n  " + key + (default_value ? ": false\n" : ": true\n"), &c).ok());
  EXPECT_EQ(c.*field, !default_value);
  for (const char* bad : {"maybe", "2"}) {
    const absl::Status s = ApplyYaml(section + ":\n  " + key + ": " + bad + "\n", &c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(section + "." + key), std::string::npos) << s;
    EXPECT_EQ(c.*field, !default_value);  // a bad value changes nothing
  }
}

TEST(ConfigTest, HostArenaHugePagesAreOnAndPrefaultOffByDefault) {
  ExpectBooleanKey("host_tier", "huge_pages", &DaemonConfig::host_huge_pages, true);
  ExpectBooleanKey("host_tier", "prefault", &DaemonConfig::host_prefault, false);
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

// Item 9 (configuration gaps): each of these was accepted and misbehaved.

// A scratch directory, removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = std::filesystem::temp_directory_path() / "kvtier-config-test-XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

bool OnTmpfs(const std::string& dir) {
  struct statfs fs;
  return statfs(dir.c_str(), &fs) == 0 &&
         (fs.f_type == TMPFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC);
}

TEST(ConfigTest, DuplicateYamlKeysAreRefusedNamingTheKeyAndBothLines) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  const std::string before = ConfigToYaml(c);
  absl::Status s = ApplyYaml("server:\n  listen: 127.0.0.1:1\n  listen: 127.0.0.1:2\n", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("duplicate key 'server.listen' (lines 2 and 3)"), std::string::npos)
      << s;
  EXPECT_EQ(ConfigToYaml(c), before);
  // A section given twice is a duplicate too (its keys would merge silently).
  s = ApplyYaml("log:\n  level: warn\nhost_tier:\n  bytes: 1GiB\nlog:\n  level: debug\n", &c);
  EXPECT_NE(s.message().find("duplicate key 'log' (lines 1 and 5)"), std::string::npos) << s;
  // The same leaf name in two sections is not a duplicate.
  EXPECT_TRUE(ApplyYaml("server:\n  listen: 127.0.0.1:0\nmetrics:\n  listen: off\n", &c).ok());
}

TEST(ConfigTest, ListenAddressesMustBeHostPortWithAPortInRange) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  for (const char* ok : {"127.0.0.1:0", "127.0.0.1:65535", "0.0.0.0:50051", "[::1]:50051",
                         "localhost:7", "unix:/tmp/kvtier.sock", "unix-abstract:kvtier"}) {
    c.listen = ok;
    EXPECT_TRUE(ValidateConfig(c).ok()) << ok << ": " << ValidateConfig(c);
  }
  c.listen = "127.0.0.1:99999";
  absl::Status s = ValidateConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("server.listen '127.0.0.1:99999': the port 99999 is outside 0..65535"),
            std::string::npos)
      << s;
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:-1", "127.0.0.1:80x", ":50051",
                          "::1:50051", "[::1:50051", "unix:", "127.0.0.1:99999999999999999999"}) {
    c.listen = bad;
    s = ValidateConfig(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("server.listen"), std::string::npos) << bad << ": " << s;
  }
  c = DefaultConfig(16 * kGiB);
  c.metrics_listen = "127.0.0.1:70000";
  s = ValidateConfig(c);
  EXPECT_NE(s.message().find("metrics.listen '127.0.0.1:70000'"), std::string::npos) << s;
  c.metrics_listen = "unix:/tmp/m.sock";  // the metrics endpoint is HTTP on TCP only
  EXPECT_FALSE(ValidateConfig(c).ok());
  c.metrics_listen = "off";
  EXPECT_TRUE(ValidateConfig(c).ok());
}

TEST(ConfigTest, NvmeDirsNamingOneDirectoryTwiceAreRefused) {
  ScratchDir scratch;
  const std::string a = scratch.path() + "/a";
  const std::string b = scratch.path() + "/b";
  std::filesystem::create_directories(a);
  std::filesystem::create_directories(b);
  std::filesystem::create_directory_symlink(a, scratch.path() + "/link-to-a");
  DaemonConfig c = DefaultConfig(16 * kGiB);
  c.max_regions = 0;  // no shm_dir check here
  c.nvme_dirs = absl::StrCat(a, ",", b);
  EXPECT_TRUE(ValidateConfigForHost(c, 16 * kGiB).ok());
  // The same text, a trailing slash, a dot, a symlink, a directory not made yet.
  for (const std::string& twice :
       {absl::StrCat(a, ",", a), absl::StrCat(a, ", ", a, "/"),
        absl::StrCat(a, ",", scratch.path(), "/./a"),
        absl::StrCat(a, ",", scratch.path(), "/link-to-a"),
        absl::StrCat(scratch.path(), "/new,", scratch.path(), "/new/")}) {
    c.nvme_dirs = twice;
    const absl::Status s = ValidateConfigForHost(c, 16 * kGiB);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << twice;
    EXPECT_NE(s.message().find("nvme.dirs names one directory twice"), std::string::npos) << s;
  }
  c.nvme_dirs = absl::StrCat(a, ",", scratch.path(), "/link-to-a");
  const absl::Status s = ValidateConfigForHost(c, 16 * kGiB);
  EXPECT_NE(s.message().find(absl::StrCat("'", a, "' and '", scratch.path(), "/link-to-a'")),
            std::string::npos)
      << s;  // both spellings
  // A file where a directory should be.
  std::ofstream(scratch.path() + "/file") << "x";
  c.nvme_dirs = scratch.path() + "/file";
  EXPECT_NE(ValidateConfigForHost(c, 16 * kGiB).message().find("not a directory"),
            std::string::npos);
}

TEST(ConfigTest, HostTierLargerThanPhysicalMemoryIsRefused) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  c.max_regions = 0;
  c.host_tier_bytes = 2 * kGiB;
  EXPECT_TRUE(ValidateConfigForHost(c, 2 * kGiB).ok());
  const absl::Status s = ValidateConfigForHost(c, 1 * kGiB);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("host_tier.bytes (2147483648 bytes (2.0 GiB)) exceeds this machine's "
                             "physical memory (1073741824 bytes (1.0 GiB))"),
            std::string::npos)
      << s;
  // The real figure: the defaults always fit.
  c = DefaultConfig(PhysicalMemoryBytes());
  c.max_regions = 0;
  c.nvme_dirs = "";
  EXPECT_TRUE(ValidateConfigForHost(c, PhysicalMemoryBytes()).ok());
}

TEST(ConfigTest, ShmDirMustExistOnTmpfsUnlessRegionsAreOff) {
  ScratchDir scratch;
  DaemonConfig c = DefaultConfig(16 * kGiB);
  c.nvme_dirs = "";
  c.shm_dir = scratch.path() + "/missing";
  absl::Status s = ValidateConfigForHost(c, 16 * kGiB);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      s.message().find(absl::StrCat("server.shm_dir '", c.shm_dir, "': No such file or directory")),
      std::string::npos)
      << s;
  c.max_regions = 0;  // shared-memory registration off: nothing to check
  EXPECT_TRUE(ValidateConfigForHost(c, 16 * kGiB).ok());
  c.max_regions = 64;
  if (OnTmpfs("/dev/shm")) {
    c.shm_dir = "/dev/shm";
    EXPECT_TRUE(ValidateConfigForHost(c, 16 * kGiB).ok());
  }
  if (OnTmpfs(scratch.path())) GTEST_SKIP() << scratch.path() << " is on tmpfs itself";
  c.shm_dir = scratch.path();
  s = ValidateConfigForHost(c, 16 * kGiB);
  EXPECT_NE(s.message().find("is not on tmpfs or hugetlbfs"), std::string::npos) << s;
  EXPECT_NE(s.message().find("server.shm_dir"), std::string::npos) << s;
}

TEST(ConfigTest, ConfigFileMustBeARegularFileOfAtMostOneMebibyte) {
  ScratchDir scratch;
  DaemonConfig c = DefaultConfig(16 * kGiB);
  absl::Status s = ApplyYamlFile(scratch.path(), &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not a regular file (a directory)"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--config"), std::string::npos) << s;
  s = ApplyYamlFile("/dev/zero", &c);  // would never end
  EXPECT_NE(s.message().find("not a regular file (a character device)"), std::string::npos) << s;
  const std::string fifo = scratch.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  s = ApplyYamlFile(fifo, &c);  // would block for a writer
  EXPECT_NE(s.message().find("not a regular file (a FIFO)"), std::string::npos) << s;
  const std::string big = scratch.path() + "/big.yaml";
  {
    std::ofstream out(big);
    out << "log:\n  level: info\n" << std::string(kMaxConfigFileBytes, '#') << "\n";
  }
  s = ApplyYamlFile(big, &c);
  EXPECT_NE(s.message().find("over the 1048576-byte limit"), std::string::npos) << s;
  const std::string good = scratch.path() + "/good.yaml";
  std::ofstream(good) << "log:\n  level: warn\n";
  ASSERT_TRUE(ApplyYamlFile(good, &c).ok());
  EXPECT_EQ(c.log_level, "warn");
}

TEST(ConfigTest, TlsFilesMustBePem) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  c.tls_cert = "/etc/kvtier/cert.pem";
  c.tls_key = "/etc/kvtier/key.pem";
  const absl::Status s = ValidateTlsPem(c, "garbage\n", "more garbage\n", "");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "security.tls_cert: '/etc/kvtier/cert.pem' is not a PEM certificate");
}

TEST(ConfigTest, CallThreadsAndCallLimitsAreReadAndBounded) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  EXPECT_EQ(c.call_threads, 16u);
  EXPECT_EQ(c.max_calls_per_method, 1024u);
  ASSERT_TRUE(
      ApplyYaml("server:\n  call_threads: 4\nlimits:\n  max_calls_per_method: 32\n", &c).ok());
  EXPECT_EQ(c.call_threads, 4u);
  EXPECT_EQ(c.max_calls_per_method, 32u);
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.call_threads = 0;
  EXPECT_NE(ValidateConfig(c).message().find("server.call_threads must be in 1..1024"),
            std::string::npos);
  c.call_threads = 1025;
  EXPECT_FALSE(ValidateConfig(c).ok());
  c.call_threads = 1;
  c.max_calls_per_method = 0;
  EXPECT_NE(ValidateConfig(c).message().find("limits.max_calls_per_method must be > 0"),
            std::string::npos);
}

TEST(ConfigTest, ClusterKeysAreReadAndChecked) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  EXPECT_EQ(c.cluster_etcd, "");  // alone by default
  EXPECT_EQ(c.cluster_name, "kvtier");
  EXPECT_EQ(c.cluster_lease_ttl_ms, 5000u);
  ASSERT_TRUE(ApplyYaml("cluster:\n  etcd: http://10.0.0.9:2379,10.0.0.10:2379\n  name: prod-a\n"
                        "  lease_ttl_ms: 3000\n  etcd_timeout_ms: 500\n  node_id: node-7\n"
                        "  advertise: 10.0.0.7:50051\n",
                        &c)
                  .ok());
  EXPECT_EQ(c.cluster_etcd, "http://10.0.0.9:2379,10.0.0.10:2379");
  EXPECT_EQ(c.cluster_node_id, "node-7");
  EXPECT_TRUE(ValidateConfig(c).ok()) << ValidateConfig(c);

  struct Case {
    const char* key;
    const char* value;
    const char* says;
  };
  for (const Case& bad : {
           Case{"cluster.lease_ttl_ms", "2500", "whole seconds"},
           Case{"cluster.lease_ttl_ms", "500", "whole seconds"},
           Case{"cluster.lease_ttl_ms", "1000", "whole seconds"},
           Case{"cluster.lease_ttl_ms", "61000", "whole seconds"},
           Case{"cluster.etcd_timeout_ms", "1001", "lease_ttl_ms/3"},
           Case{"cluster.etcd_timeout_ms", "0", "lease_ttl_ms/3"},
           Case{"cluster.pull_timeout_ms", "0", "cluster.pull_timeout_ms"},
           Case{"cluster.name", "a/b", "cluster.name"},
           Case{"cluster.node_id", "node 7", "cluster.node_id"},
           Case{"cluster.etcd", "https://10.0.0.9:2379", "https is not supported"},
           Case{"cluster.etcd", "10.0.0.9", "cluster.etcd"},
           Case{"cluster.etcd", "10.0.0.9:2379,", "cluster.etcd"},
           Case{"cluster.advertise", "0.0.0.0:50051", "every interface"},
           Case{"cluster.advertise", "10.0.0.7:0", "no port"},
           Case{"cluster.advertise", "10.0.0.7", "cluster.advertise"},
       }) {
    DaemonConfig d = c;
    ASSERT_TRUE(SetConfigKey(bad.key, bad.value, &d).ok()) << bad.key;
    const absl::Status s = ValidateConfig(d);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad.key << "=" << bad.value;
    EXPECT_NE(s.message().find(bad.says), std::string::npos) << bad.key << ": " << s;
  }
  // Without an advertised address, server.listen must be one peers can dial.
  c.cluster_advertise = "";
  c.listen = "0.0.0.0:50051";
  EXPECT_NE(ValidateConfig(c).message().find("every interface"), std::string::npos);
  c.listen = "unix:/tmp/k.sock";
  EXPECT_NE(ValidateConfig(c).message().find("set cluster.advertise"), std::string::npos);
  c.listen = "127.0.0.1:0";  // the bound port is advertised
  EXPECT_TRUE(ValidateConfig(c).ok()) << ValidateConfig(c);
  // Alone, the listen address is not the cluster's business.
  c.cluster_etcd = "";
  c.listen = "0.0.0.0:50051";
  EXPECT_TRUE(ValidateConfig(c).ok());
}

TEST(ConfigTest, EventsKeysAreReadAndChecked) {
  DaemonConfig c = DefaultConfig(16 * kGiB);
  EXPECT_EQ(c.events_zmq_endpoint, "");  // off by default
  EXPECT_EQ(c.events_zmq_hashes, "int");
  ASSERT_TRUE(ApplyYaml("events:\n  zmq_endpoint: tcp://*:5557\n  zmq_replay_endpoint: "
                        "tcp://*:5558\n  zmq_topic: kvtier/\n  zmq_buffer_steps: 500\n",
                        &c)
                  .ok());
  EXPECT_EQ(c.events_zmq_endpoint, "tcp://*:5557");
  EXPECT_EQ(c.events_zmq_replay_endpoint, "tcp://*:5558");
  EXPECT_EQ(c.events_zmq_topic, "kvtier/");
  EXPECT_EQ(c.events_zmq_buffer_steps, 500u);
  EXPECT_TRUE(ValidateConfig(c).ok()) << ValidateConfig(c);
  for (const auto& [key, value, says] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"events.zmq_endpoint", "localhost:5557", "ZeroMQ endpoint"},
           {"events.zmq_replay_endpoint", "5558", "ZeroMQ endpoint"},
           {"events.zmq_replay_endpoint", "tcp://*:5557", "must differ"},
           {"events.zmq_buffer_steps", "0", "zmq_buffer_steps"},
           {"events.zmq_hashes", "hex", "int (vLLM's default) or bytes"},
           {"events.zmq_endpoint", "", "needs events.zmq_endpoint"},
       }) {
    DaemonConfig d = c;
    ASSERT_TRUE(SetConfigKey(key, value, &d).ok()) << key;
    const absl::Status s = ValidateConfig(d);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << key << "=" << value;
    EXPECT_NE(s.message().find(says), std::string::npos) << key << ": " << s;
  }
}

}  // namespace
}  // namespace kvtier
