#include "server/config.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "costmodel/catalog.h"
#include "server/config_validation.h"
#include "spdlog/common.h"
#include "yaml-cpp/yaml.h"

namespace kvtier {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

struct KeySpec {
  const char* path;
  std::function<absl::Status(absl::string_view, DaemonConfig*)> set;
  std::function<std::string(const DaemonConfig&)> get;
};

absl::StatusOr<uint32_t> ParseU32(absl::string_view text) {
  uint32_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not an integer in 0..4294967295"));
  }
  return v;
}

// Names, paths and addresses: printable text. Control characters (a stray
// carriage return, say) are refused: no key wants them, and they would not
// survive printing the config as YAML and reading it back (found by
// tests/fuzz/config_fuzz).
absl::StatusOr<std::string> ParseString(absl::string_view text) {
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat("contains the control character 0x", absl::Hex(u, absl::kZeroPad2)));
    }
  }
  return std::string(text);
}

absl::StatusOr<double> ParseFraction(absl::string_view text) {
  double v = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(text), &v) || !(v >= 0 && v <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a fraction in 0..1"));
  }
  return v;
}

absl::StatusOr<double> ParsePositive(absl::string_view text) {
  double v = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(text), &v) || !(v > 0 && v < 1e6)) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a positive number"));
  }
  return v;
}

absl::StatusOr<bool> ParseBool(absl::string_view text) {
  const absl::string_view t = absl::StripAsciiWhitespace(text);
  if (t == "true") return true;
  if (t == "false") return false;
  return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not true or false"));
}

std::string Print(bool v) { return v ? "true" : "false"; }
std::string Print(double v) { return absl::StrCat(v); }
std::string Print(uint64_t v) { return std::to_string(v); }
std::string Print(uint32_t v) { return std::to_string(v); }
std::string Print(const std::string& v) { return v; }

// A key bound to one field of DaemonConfig, read with `parse`.
template <typename T>
KeySpec Field(const char* path, T DaemonConfig::*field,
              absl::StatusOr<T> (*parse)(absl::string_view)) {
  return {path,
          [field, parse](absl::string_view v, DaemonConfig* c) {
            ASSIGN_OR_RETURN(T parsed, parse(v));
            c->*field = std::move(parsed);
            return absl::OkStatus();
          },
          [field](const DaemonConfig& c) { return Print(c.*field); }};
}

const std::vector<KeySpec>& Keys() {
  static const std::vector<KeySpec>* keys = new std::vector<KeySpec>{
      Field("server.listen", &DaemonConfig::listen, ParseString),
      Field("server.max_message_bytes", &DaemonConfig::max_message_bytes, ParseBytes),
      Field("server.get_chunk_bytes", &DaemonConfig::get_chunk_bytes, ParseBytes),
      Field("server.shutdown_grace_ms", &DaemonConfig::shutdown_grace_ms, ParseU32),
      Field("server.max_connection_idle_ms", &DaemonConfig::max_connection_idle_ms, ParseU32),
      Field("server.shm_dir", &DaemonConfig::shm_dir, ParseString),
      Field("server.call_threads", &DaemonConfig::call_threads, ParseU32),
      Field("host_tier.bytes", &DaemonConfig::host_tier_bytes, ParseBytes),
      Field("host_tier.slab_bytes", &DaemonConfig::host_slab_bytes, ParseBytes),
      Field("host_tier.huge_pages", &DaemonConfig::host_huge_pages, ParseBool),
      Field("host_tier.prefault", &DaemonConfig::host_prefault, ParseBool),
      Field("cache.eviction_policy", &DaemonConfig::eviction_policy, ParseString),
      Field("limits.max_block_bytes", &DaemonConfig::max_block_bytes, ParseBytes),
      Field("limits.max_namespaces", &DaemonConfig::max_namespaces, ParseU32),
      Field("limits.max_keys_per_request", &DaemonConfig::max_keys_per_request, ParseU32),
      Field("limits.max_leases", &DaemonConfig::max_leases, ParseU32),
      Field("limits.max_regions", &DaemonConfig::max_regions, ParseU32),
      Field("limits.max_region_bytes", &DaemonConfig::max_region_bytes, ParseBytes),
      Field("limits.tenant_max_namespaces", &DaemonConfig::tenant_max_namespaces, ParseU32),
      Field("limits.tenant_max_leases", &DaemonConfig::tenant_max_leases, ParseU32),
      Field("limits.tenant_max_lease_blocks", &DaemonConfig::tenant_max_lease_blocks, ParseU32),
      Field("limits.tenant_max_regions", &DaemonConfig::tenant_max_regions, ParseU32),
      Field("limits.tenant_max_region_bytes", &DaemonConfig::tenant_max_region_bytes, ParseBytes),
      Field("limits.tenant_reserved_bytes", &DaemonConfig::tenant_reserved_bytes, ParseBytes),
      Field("limits.stream_idle_timeout_ms", &DaemonConfig::stream_idle_timeout_ms, ParseU32),
      Field("limits.max_calls_per_method", &DaemonConfig::max_calls_per_method, ParseU32),
      Field("leases.default_ttl_ms", &DaemonConfig::default_lease_ttl_ms, ParseU32),
      Field("leases.max_ttl_ms", &DaemonConfig::max_lease_ttl_ms, ParseU32),
      Field("log.level", &DaemonConfig::log_level, ParseString),
      Field("nvme.dirs", &DaemonConfig::nvme_dirs, ParseString),
      Field("nvme.bytes_per_dir", &DaemonConfig::nvme_bytes_per_dir, ParseBytes),
      Field("nvme.slab_bytes", &DaemonConfig::nvme_slab_bytes, ParseBytes),
      Field("nvme.io_engine", &DaemonConfig::nvme_io_engine, ParseString),
      Field("nvme.queue_depth", &DaemonConfig::nvme_queue_depth, ParseU32),
      Field("nvme.write_policy", &DaemonConfig::nvme_write_policy, ParseString),
      Field("nvme.write_through_hits", &DaemonConfig::nvme_write_through_hits, ParseU32),
      Field("nvme.admit_min_uses", &DaemonConfig::nvme_admit_min_uses, ParseU32),
      Field("nvme.host_high_watermark", &DaemonConfig::nvme_host_high_watermark, ParseFraction),
      Field("nvme.host_low_watermark", &DaemonConfig::nvme_host_low_watermark, ParseFraction),
      Field("nvme.high_watermark", &DaemonConfig::nvme_high_watermark, ParseFraction),
      Field("nvme.low_watermark", &DaemonConfig::nvme_low_watermark, ParseFraction),
      Field("nvme.mover_interval_ms", &DaemonConfig::nvme_mover_interval_ms, ParseU32),
      Field("nvme.device_capacity_bytes", &DaemonConfig::nvme_device_capacity_bytes, ParseBytes),
      Field("nvme.dwpd", &DaemonConfig::nvme_dwpd, ParsePositive),
      Field("nvme.warranty_years", &DaemonConfig::nvme_warranty_years, ParsePositive),
      Field("nvme.wear_safety", &DaemonConfig::nvme_wear_safety, ParseFraction),
      Field("nvme.wear_burst_seconds", &DaemonConfig::nvme_wear_burst_seconds, ParseU32),
      Field("nvme.register_arena", &DaemonConfig::nvme_register_arena, ParseBool),
      Field("gpu.tier", &DaemonConfig::gpu_tier, ParseString),
      Field("gpu.tier_slot_bytes", &DaemonConfig::gpu_tier_slot_bytes, ParseBytes),
      Field("gpu.device", &DaemonConfig::gpu_device, ParseU32),
      Field("peer.transport", &DaemonConfig::peer_transport, ParseString),
      Field("peer.role", &DaemonConfig::peer_role, ParseString),
      Field("peer.timeout_ms", &DaemonConfig::peer_timeout_ms, ParseU32),
      Field("peer.max_pending", &DaemonConfig::peer_max_pending, ParseU32),
      Field("peer.allowed", &DaemonConfig::peer_allowed, ParseString),
      Field("peer.net_devices", &DaemonConfig::peer_net_devices, ParseString),
      Field("security.tls_cert", &DaemonConfig::tls_cert, ParseString),
      Field("security.tls_key", &DaemonConfig::tls_key, ParseString),
      Field("security.tls_client_ca", &DaemonConfig::tls_client_ca, ParseString),
      Field("security.identities_file", &DaemonConfig::identities_file, ParseString),
      Field("security.peer_tls_ca", &DaemonConfig::peer_tls_ca, ParseString),
      Field("security.peer_token_file", &DaemonConfig::peer_token_file, ParseString),
      Field("metrics.listen", &DaemonConfig::metrics_listen, ParseString),
      Field("metrics.max_namespaces", &DaemonConfig::metrics_max_namespaces, ParseU32),
      Field("cluster.etcd", &DaemonConfig::cluster_etcd, ParseString),
      Field("cluster.name", &DaemonConfig::cluster_name, ParseString),
      Field("cluster.advertise", &DaemonConfig::cluster_advertise, ParseString),
      Field("cluster.node_id", &DaemonConfig::cluster_node_id, ParseString),
      Field("cluster.lease_ttl_ms", &DaemonConfig::cluster_lease_ttl_ms, ParseU32),
      Field("cluster.etcd_timeout_ms", &DaemonConfig::cluster_etcd_timeout_ms, ParseU32),
      Field("cluster.pull_timeout_ms", &DaemonConfig::cluster_pull_timeout_ms, ParseU32),
      Field("events.zmq_endpoint", &DaemonConfig::events_zmq_endpoint, ParseString),
      Field("events.zmq_replay_endpoint", &DaemonConfig::events_zmq_replay_endpoint, ParseString),
      Field("events.zmq_topic", &DaemonConfig::events_zmq_topic, ParseString),
      Field("events.zmq_model", &DaemonConfig::events_zmq_model, ParseString),
      Field("events.zmq_hashes", &DaemonConfig::events_zmq_hashes, ParseString),
      Field("events.zmq_buffer_steps", &DaemonConfig::events_zmq_buffer_steps, ParseU32),
      Field("costmodel.gpu", &DaemonConfig::costmodel_gpu, ParseString),
      Field("costmodel.mfu", &DaemonConfig::costmodel_mfu, ParseFraction),
      Field("costmodel.compute_dtype", &DaemonConfig::costmodel_compute_dtype, ParseString),
      Field("costmodel.probe_tiers", &DaemonConfig::costmodel_probe_tiers, ParseBool),
      Field("costmodel.admission_tokens", &DaemonConfig::costmodel_admission_tokens, ParseU32),
  };
  return *keys;
}

// Flattens a YAML mapping into (dotted key, scalar, line) triples. A key
// that appears twice in one mapping is an error naming both lines: yaml-cpp
// keeps both, and the last would silently win.
absl::Status Flatten(const YAML::Node& node, const std::string& prefix,
                     std::vector<std::tuple<std::string, std::string, int>>* out) {
  absl::flat_hash_map<std::string, int> seen;  // key -> its first line
  for (const auto& kv : node) {
    const std::string name = kv.first.as<std::string>();
    const std::string path = prefix.empty() ? name : absl::StrCat(prefix, ".", name);
    const YAML::Node& value = kv.second;
    const int line = kv.first.Mark().line + 1;
    if (auto [it, fresh] = seen.emplace(name, line); !fresh) {
      return absl::InvalidArgumentError(absl::StrCat("config line ", line, ": duplicate key '",
                                                     path, "' (lines ", it->second, " and ", line,
                                                     ")"));
    }
    if (value.IsMap()) {
      RETURN_IF_ERROR(Flatten(value, path, out));
    } else if (value.IsScalar()) {
      out->emplace_back(path, value.Scalar(), line);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("config line ", line, ": key '", path, "' must be a scalar or a mapping"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<uint64_t> ParseBytes(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  struct Suffix {
    const char* name;
    int shift;
  };
  static constexpr Suffix kSuffixes[] = {{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
  int shift = 0;
  for (const Suffix& s : kSuffixes) {
    if (absl::EndsWith(t, s.name)) {
      shift = s.shift;
      t.remove_suffix(3);
      t = absl::StripTrailingAsciiWhitespace(t);
      break;
    }
  }
  uint64_t v = 0;
  if (!absl::SimpleAtoi(t, &v) || (shift > 0 && v > (~uint64_t{0} >> shift))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "' is not a size (an integer, optionally with KiB, MiB, GiB or TiB)"));
  }
  return v << shift;
}

uint64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 4 * kGiB;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

DaemonConfig DefaultConfig(uint64_t physical_memory_bytes, uint64_t free_disk_bytes) {
  DaemonConfig c;
  const uint64_t want = std::min(physical_memory_bytes / 4, 8 * kGiB);
  c.host_tier_bytes = std::max(want / c.host_slab_bytes, uint64_t{1}) * c.host_slab_bytes;
  const uint64_t disk = std::min(free_disk_bytes / 10, 16 * kGiB);
  c.nvme_bytes_per_dir = disk / c.nvme_slab_bytes * c.nvme_slab_bytes;
  if (c.nvme_bytes_per_dir > 0) c.nvme_dirs = "./kvtier-data";
  return c;
}

uint64_t FreeDiskBytes(const std::string& path) {
  struct statvfs st;
  if (statvfs(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

absl::Status SetConfigKey(absl::string_view key, absl::string_view value, DaemonConfig* config) {
  for (const KeySpec& k : Keys()) {
    if (key != k.path) continue;
    DaemonConfig copy = *config;
    if (absl::Status s = k.set(value, &copy); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("config key '", key, "': ", s.message()));
    }
    *config = std::move(copy);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown config key '", key, "'"));
}

absl::Status SetConfigAssignment(absl::string_view assignment, DaemonConfig* config) {
  std::pair<absl::string_view, absl::string_view> kv =
      absl::StrSplit(assignment, absl::MaxSplits('=', 1));
  if (assignment.find('=') == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", assignment, "' is not KEY=VALUE (e.g. host_tier.bytes=4GiB)"));
  }
  return SetConfigKey(absl::StripAsciiWhitespace(kv.first), kv.second, config);
}

absl::Status ApplyYaml(absl::string_view yaml, DaemonConfig* config) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config is not valid YAML: ", e.what()));
  }
  if (root.IsNull()) return absl::OkStatus();  // empty file
  if (!root.IsMap()) {
    return absl::InvalidArgumentError("config must be a YAML mapping of sections");
  }
  std::vector<std::tuple<std::string, std::string, int>> flat;
  try {
    RETURN_IF_ERROR(Flatten(root, "", &flat));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", e.what()));
  }
  DaemonConfig copy = *config;
  for (const auto& [key, value, line] : flat) {
    if (absl::Status s = SetConfigKey(key, value, &copy); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("config line ", line, ": ", s.message()));
    }
  }
  *config = std::move(copy);
  return absl::OkStatus();
}

absl::Status ApplyYamlFile(const std::string& path, DaemonConfig* config) {
  ASSIGN_OR_RETURN(std::string text, ReadBoundedFile(path, "--config"));
  absl::Status s = ApplyYaml(text, config);
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  return s;
}

absl::Status ValidateConfig(const DaemonConfig& c) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (c.listen.empty()) return bad("server.listen must not be empty");
  RETURN_IF_ERROR(ValidateListenAddress("server.listen", c.listen, true));
  if (c.max_message_bytes < (uint64_t{1} << 20) || c.max_message_bytes > (uint64_t{1} << 30)) {
    return bad("server.max_message_bytes must be in 1MiB..1GiB");
  }
  if (c.get_chunk_bytes < 4096 || c.get_chunk_bytes + 65536 > c.max_message_bytes) {
    return bad(
        "server.get_chunk_bytes must be at least 4096 and leave 64KiB of "
        "server.max_message_bytes for headers");
  }
  if (c.host_slab_bytes == 0 || c.host_slab_bytes % 4096 != 0) {
    return bad("host_tier.slab_bytes must be a positive multiple of 4096");
  }
  if (c.host_tier_bytes < c.host_slab_bytes) {
    return bad("host_tier.bytes (", c.host_tier_bytes, ") must hold at least one slab (",
               c.host_slab_bytes, ")");
  }
  if (c.max_block_bytes == 0 || c.max_block_bytes > c.host_slab_bytes) {
    return bad("limits.max_block_bytes must be in 1..host_tier.slab_bytes");
  }
  if (c.eviction_policy != "value" && c.eviction_policy != "lru") {
    return bad("cache.eviction_policy must be value or lru, not '", c.eviction_policy, "'");
  }
  if (c.tenant_max_namespaces == 0 || c.tenant_max_leases == 0 || c.tenant_max_lease_blocks == 0 ||
      c.tenant_max_regions == 0 || c.tenant_max_region_bytes == 0) {
    return bad(
        "limits.tenant_max_namespaces, tenant_max_leases, tenant_max_lease_blocks, "
        "tenant_max_regions and tenant_max_region_bytes must be > 0");
  }
  if (c.call_threads < 1 || c.call_threads > 1024) {
    return bad("server.call_threads must be in 1..1024");
  }
  if (c.max_calls_per_method == 0) return bad("limits.max_calls_per_method must be > 0");
  if (c.max_namespaces == 0 || c.max_keys_per_request == 0 || c.max_leases == 0) {
    return bad("limits.max_namespaces, max_keys_per_request and max_leases must be > 0");
  }
  if (c.default_lease_ttl_ms == 0 || c.default_lease_ttl_ms > c.max_lease_ttl_ms) {
    return bad("leases.default_ttl_ms must be in 1..leases.max_ttl_ms");
  }
  if (!c.nvme_dirs.empty()) {
    if (c.nvme_slab_bytes == 0 || c.nvme_slab_bytes % 4096 != 0) {
      return bad("nvme.slab_bytes must be a positive multiple of 4096");
    }
    if (c.nvme_slab_bytes < c.max_block_bytes + 4096) {
      return bad(
          "nvme.slab_bytes must hold a block and its 4KiB header: at least "
          "limits.max_block_bytes + 4096");
    }
    if (c.nvme_bytes_per_dir < c.nvme_slab_bytes) {
      return bad("nvme.bytes_per_dir must hold at least one nvme.slab_bytes");
    }
    if (c.nvme_io_engine != "auto" && c.nvme_io_engine != "io_uring" &&
        c.nvme_io_engine != "pread") {
      return bad("nvme.io_engine must be auto, io_uring or pread");
    }
    if (c.nvme_queue_depth == 0 || c.nvme_queue_depth > 4096) {
      return bad("nvme.queue_depth must be in 1..4096");
    }
    if (c.nvme_write_policy != "write_back" && c.nvme_write_policy != "write_through" &&
        c.nvme_write_policy != "write_through_after_hits") {
      return bad(
          "nvme.write_policy must be write_back, write_through or "
          "write_through_after_hits");
    }
    if (!(c.nvme_host_low_watermark < c.nvme_host_high_watermark) ||
        !(c.nvme_low_watermark < c.nvme_high_watermark)) {
      return bad("nvme watermarks: each low watermark must be below its high watermark");
    }
    if (c.nvme_mover_interval_ms == 0) return bad("nvme.mover_interval_ms must be > 0");
  }
  if (c.gpu_tier != "auto" && c.gpu_tier != "off") {
    absl::StatusOr<uint64_t> bytes = ParseBytes(c.gpu_tier);
    if (!bytes.ok() || *bytes < c.gpu_tier_slot_bytes) {
      return bad("gpu.tier must be auto, off, or a size of at least gpu.tier_slot_bytes (",
                 c.gpu_tier_slot_bytes, ")");
    }
  }
  if (c.gpu_tier_slot_bytes == 0) return bad("gpu.tier_slot_bytes must be > 0");
  if (c.peer_transport != "auto" && c.peer_transport != "ucx" && c.peer_transport != "off") {
    return bad("peer.transport must be auto, ucx or off");
  }
  if (c.peer_role != "prefill" && c.peer_role != "decode" && c.peer_role != "both") {
    return bad("peer.role must be prefill, decode or both");
  }
  if (c.peer_timeout_ms == 0 || c.peer_timeout_ms > 600'000) {
    return bad("peer.timeout_ms must be in 1..600000");
  }
  if (c.peer_max_pending == 0) return bad("peer.max_pending must be > 0");
  if (c.peer_net_devices.empty() ||
      c.peer_net_devices.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789_.:,-") != std::string::npos) {
    return bad("peer.net_devices must be auto, all or a comma-separated list of devices");
  }
  if (!c.peer_token_file.empty() && c.peer_allowed.empty()) {
    return bad(
        "security.peer_token_file needs peer.allowed: the daemon presents its token only to the "
        "peers listed there");
  }
  if (c.tls_cert.empty() != c.tls_key.empty()) {
    return bad("security.tls_cert and security.tls_key must be set together");
  }
  if (!c.tls_client_ca.empty() && c.tls_cert.empty()) {
    return bad("security.tls_client_ca needs TLS: set security.tls_cert and security.tls_key");
  }
  if (c.metrics_listen != "off") {
    if (absl::Status s = ValidateListenAddress("metrics.listen", c.metrics_listen, false);
        !s.ok()) {
      return bad(s.message(), " (metrics.listen is host:port or off)");
    }
  }
  if (absl::Status s = ValidateClusterConfig(c); !s.ok()) return s;
  if (absl::Status s = ValidateEventsConfig(c); !s.ok()) return s;
  if (!(c.costmodel_mfu > 0)) return bad("costmodel.mfu must be in (0, 1]");
  if (c.costmodel_compute_dtype != "bf16" && c.costmodel_compute_dtype != "fp8") {
    return bad("costmodel.compute_dtype must be bf16 or fp8");
  }
  if (c.costmodel_admission_tokens == 0) return bad("costmodel.admission_tokens must be > 0");
  if (c.costmodel_gpu != "auto") {
    if (absl::StatusOr<costmodel::GpuSpec> g = costmodel::CatalogGpu(c.costmodel_gpu); !g.ok()) {
      return bad("costmodel.gpu: ", g.status().message(), " (or auto)");
    }
  }
  if (spdlog::level::from_str(c.log_level) == spdlog::level::off && c.log_level != "off") {
    return bad("log.level '", c.log_level,
               "' is not one of trace, debug, info, warn, error, critical, off");
  }
  return absl::OkStatus();
}

std::string ConfigToYaml(const DaemonConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::string section;
  for (const KeySpec& k : Keys()) {
    std::pair<std::string, std::string> parts = absl::StrSplit(k.path, absl::MaxSplits('.', 1));
    if (parts.first != section) {
      if (!section.empty()) out << YAML::EndMap;
      section = parts.first;
      out << YAML::Key << section << YAML::Value << YAML::BeginMap;
    }
    out << YAML::Key << parts.second << YAML::Value << k.get(config);
  }
  if (!section.empty()) out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> out;
  for (const KeySpec& k : Keys()) out.push_back(k.path);
  return out;
}

}  // namespace kvtier
