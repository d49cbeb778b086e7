// The kvtier CLI's operator views: daemon status, health, peers, open
// namespaces, SSD wear, the tier table, the hottest blocks of a namespace,
// bulk eviction with a progress bar, and a refreshing watch. Each prints
// text, or the daemon's answer as JSON with --json, and returns the process
// exit status (0, 1 daemon error, 2 usage).
//
// Thread-safety: free functions, one command per process.
#ifndef KVTIER_CLIENT_CLI_OPERATOR_VIEWS_H_
#define KVTIER_CLIENT_CLI_OPERATOR_VIEWS_H_

#include <cstdint>
#include <string>

#include "client/cli/daemon_connection.h"

namespace kvtier {

// Build, GPU, transfer, tier and planner status with the daemon's counters.
int Status(const Globals& g);
// grpc.health.v1 check of the daemon (no credentials needed); 0 when serving.
int Health(const Globals& g);
// Peer daemons: connection, lanes, bytes moved and observed bandwidth.
int Peers(const Globals& g);
// Open namespaces: layout, tenant, blocks, bytes, plans and encoding.
int Namespaces(const Globals& g);
// The SSD write budget, wear-out projection and SMART per NVMe device.
int Wear(const Globals& g);
// capacity, used, blocks, share of block reads served (hit ratio) and the
// read bandwidth the planner measured, per tier.
int Tiers(const Globals& g);
// The `top` most used blocks of a namespace.
int Blocks(const Globals& g, const std::string& namespace_id, uint32_t top);
// Evicts a namespace (or all, with all_namespaces); progress on stderr.
int Evict(const Globals& g, const std::string& namespace_id, bool all_namespaces, bool progress);
// Redraws a summary every `interval_s`; `count` > 0 stops after that many.
int Watch(const Globals& g, double interval_s, int count);

}  // namespace kvtier

#endif  // KVTIER_CLIENT_CLI_OPERATOR_VIEWS_H_
