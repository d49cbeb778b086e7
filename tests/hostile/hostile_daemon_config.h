// The configuration the in-process hostile-client tests start from: the
// embedded defaults shrunk to test size (ephemeral port, a host tier of
// `host_bytes` in slabs of `slab_bytes`, no NVMe, no GPU tier, no metrics
// endpoint, no tier probe). Each test sets what it attacks on top.
#ifndef KVTIER_TESTS_HOSTILE_HOSTILE_DAEMON_CONFIG_H_
#define KVTIER_TESTS_HOSTILE_HOSTILE_DAEMON_CONFIG_H_

#include <cstdint>

#include "server/config.h"

namespace kvtier {

inline DaemonConfig HostileTestConfig(uint64_t host_bytes, uint64_t slab_bytes,
                                      uint64_t max_block_bytes) {
  DaemonConfig c = DefaultConfig(uint64_t{4} << 30);
  c.listen = "127.0.0.1:0";
  c.host_tier_bytes = host_bytes;
  c.host_slab_bytes = slab_bytes;
  c.max_block_bytes = max_block_bytes;
  c.nvme_dirs = "";
  c.costmodel_probe_tiers = false;
  c.gpu_tier = "off";
  c.metrics_listen = "off";
  return c;
}

}  // namespace kvtier

#endif  // KVTIER_TESTS_HOSTILE_HOSTILE_DAEMON_CONFIG_H_
