// TestDaemonConfig: the daemon's embedded defaults shrunk to test size, the
// configuration the in-process daemon tests (tests/integration,
// tests/hostile, the client tests) start from: loopback on an ephemeral
// port, no metrics endpoint, no tier probes at start, a host tier of
// `host_bytes` in slabs of `slab_bytes`, blocks of at most
// `max_block_bytes`. NVMe stays off and the GPU tier at its default; each
// test sets what it exercises on top.
//
// Test-only and header-only: it needs server/config.h, so only tests that
// link kvtier_server include it (the kvtier_testing library does not).
#ifndef KVTIER_TESTING_TEST_DAEMON_CONFIG_H_
#define KVTIER_TESTING_TEST_DAEMON_CONFIG_H_

#include <cstdint>

#include "server/config.h"

namespace kvtier {

inline DaemonConfig TestDaemonConfig(uint64_t host_bytes, uint64_t slab_bytes,
                                     uint64_t max_block_bytes) {
  DaemonConfig c = DefaultConfig(uint64_t{4} << 30);
  c.listen = "127.0.0.1:0";
  c.metrics_listen = "off";
  c.host_tier_bytes = host_bytes;
  c.host_slab_bytes = slab_bytes;
  c.max_block_bytes = max_block_bytes;
  c.nvme_dirs = "";
  c.costmodel_probe_tiers = false;
  return c;
}

}  // namespace kvtier

#endif  // KVTIER_TESTING_TEST_DAEMON_CONFIG_H_
