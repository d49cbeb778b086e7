// `kvtier cluster`: the cluster as the daemon at --addr sees it: etcd's
// reachability, the members with their free capacity, share of the keys
// and the bandwidth this daemon observed to each, and, with --owner, which
// member owns given blocks.
//
// Thread-safety: registered and run by main's thread.
#ifndef KVTIER_CLIENT_CLI_CLUSTER_COMMAND_H_
#define KVTIER_CLIENT_CLI_CLUSTER_COMMAND_H_

#include "CLI/CLI.hpp"
#include "client/cli/command_set.h"

namespace kvtier {

void RegisterClusterCommand(CLI::App& app, CommandSet* commands);

}  // namespace kvtier

#endif  // KVTIER_CLIENT_CLI_CLUSTER_COMMAND_H_
