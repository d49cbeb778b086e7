// kvtierd: parses flags, loads the configuration, starts the Daemon and
// waits for SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "server/build_info.h"
#include "server/config.h"
#include "server/config_validation.h"
#include "server/daemon.h"
#include "server/heap_tuning.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace {

// Every connection, NVMe file and shared-memory region takes a descriptor,
// and a soft RLIMIT_NOFILE of 256 or 1024 (common defaults) is soon reached:
// gRPC's accept loop then stalls. The soft limit goes up to the hard one.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    spdlog::warn("open files: cannot read RLIMIT_NOFILE: {}", std::strerror(errno));
    return;
  }
  if (limit.rlim_cur >= limit.rlim_max) {
    spdlog::info("open files: limit {} (the hard limit)", static_cast<uint64_t>(limit.rlim_cur));
    return;
  }
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    spdlog::warn("open files: cannot raise the limit from {} to {}: {}",
                 static_cast<uint64_t>(before), static_cast<uint64_t>(limit.rlim_max),
                 std::strerror(errno));
    return;
  }
  spdlog::info("open files: limit raised from {} to {} (the hard limit)",
               static_cast<uint64_t>(before), static_cast<uint64_t>(limit.rlim_max));
}

int Run(int argc, char** argv) {
  using kvtier::DaemonConfig;
  CLI::App app{"kvtierd: KV-cache tiering daemon"};
  app.set_version_flag("--version", std::string(kvtier::kKvtierVersion));
  std::string config_path, listen, host_tier_bytes, log_level;
  std::vector<std::string> sets;
  bool print_config = false;
  app.add_option("--config", config_path, "YAML config file (keys: see docs/operations.md)");
  app.add_option("--listen", listen, "gRPC address, host:port or unix:/path (server.listen)");
  app.add_option("--host-tier-bytes", host_tier_bytes,
                 "host tier size, e.g. 8GiB (host_tier.bytes)");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off (log.level)");
  app.add_option("--set", sets,
                 "KEY=VALUE for any config key; repeatable. Keys: " +
                     absl::StrJoin(kvtier::ConfigKeys(), ", "));
  app.add_flag("--print-config", print_config, "print the effective configuration and exit");
  CLI11_PARSE(app, argc, argv);

  spdlog::set_default_logger(spdlog::stderr_color_mt("kvtierd"));

  // Defaults < YAML file < flags.
  DaemonConfig config =
      kvtier::DefaultConfig(kvtier::PhysicalMemoryBytes(), kvtier::FreeDiskBytes("."));
  absl::Status status;
  if (!config_path.empty()) status = kvtier::ApplyYamlFile(config_path, &config);
  if (status.ok() && !listen.empty())
    status = kvtier::SetConfigKey("server.listen", listen, &config);
  if (status.ok() && !host_tier_bytes.empty()) {
    status = kvtier::SetConfigKey("host_tier.bytes", host_tier_bytes, &config);
  }
  if (status.ok() && !log_level.empty())
    status = kvtier::SetConfigKey("log.level", log_level, &config);
  for (const std::string& s : sets) {
    if (status.ok()) status = kvtier::SetConfigAssignment(s, &config);
  }
  if (status.ok()) status = kvtier::ValidateConfig(config);
  // Against this machine: nvme.dirs distinct, host tier within RAM, shm_dir on tmpfs.
  if (status.ok()) status = kvtier::ValidateConfigForHost(config, kvtier::PhysicalMemoryBytes());
  if (!status.ok()) {
    std::fprintf(stderr, "kvtierd: invalid configuration: %s\n",
                 std::string(status.message()).c_str());
    return 2;
  }
  const std::string yaml = kvtier::ConfigToYaml(config);
  if (print_config) {
    std::cout << yaml;
    return 0;
  }
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  std::cout << "# kvtierd " << kvtier::kKvtierVersion << " effective configuration\n"
            << yaml << std::flush;

  // Block the stop signals in every thread (gRPC's inherit this mask) and
  // wait for them here.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  RaiseOpenFileLimit();
  if (absl::Status s = kvtier::TuneHeapForMessages(); !s.ok()) {
    spdlog::warn("heap tuning: {} (message buffers may be faulted in on every call)", s.ToString());
  }
  // Debian's abseil is built without NDEBUG, so every absl::Mutex lock
  // (gRPC's, on every call) runs abseil's deadlock detector: a global graph
  // of lock orders under a global lock, 1.5-2.5% of the CPU samples of
  // bench/lookup_rpc under perf. Off in the daemon; tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::StatusOr<std::unique_ptr<kvtier::Daemon>> daemon = kvtier::Daemon::Start(config);
  if (!daemon.ok()) {
    spdlog::critical("cannot start: {}", daemon.status().ToString());
    return 1;
  }
  spdlog::info("gpu: {}", (*daemon)->gpus().detail);
  const kvtier::CacheSnapshot snap = (*daemon)->cache().Snapshot();
  spdlog::info("host tier: {} bytes, {}, {}", snap.host.capacity_bytes,
               (*daemon)->cache().host_huge_pages() ? "transparent huge pages advised"
               : config.host_huge_pages ? "base pages (transparent huge pages off or refused)"
                                        : "base pages (host_tier.huge_pages=false)",
               config.host_prefault ? "faulted in at start (host_tier.prefault)"
                                    : "faulted in as blocks land");
  if (snap.nvme.enabled) {
    spdlog::info("nvme tier: {} bytes in {} ({}), {} blocks recovered",
                 snap.nvme.tier.capacity_bytes, config.nvme_dirs, snap.nvme.io_engine,
                 snap.counters.recovered_blocks);
  } else {
    spdlog::info("nvme tier: off (set nvme.dirs)");
  }
  spdlog::info("kvtierd listening on {}", (*daemon)->listen_address());

  int signal = 0;
  sigwait(&stop_signals, &signal);
  spdlog::info("received {}; shutting down (grace {} ms)", signal == SIGINT ? "SIGINT" : "SIGTERM",
               config.shutdown_grace_ms);
  (*daemon)->Shutdown(absl::Milliseconds(config.shutdown_grace_ms));
  daemon->reset();
  spdlog::info("kvtierd stopped cleanly");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtierd: fatal: %s\n", e.what());
    return 1;
  }
}
