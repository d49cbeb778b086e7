// The operator's read-and-manage commands of `kvtier`: status, tiers,
// namespaces, wear, peers, health, blocks, evict and watch (the views they
// print are in operator_views.h).
//
// Thread-safety: called once by main's thread before parsing.
#ifndef KVTIER_CLIENT_CLI_VIEW_COMMANDS_H_
#define KVTIER_CLIENT_CLI_VIEW_COMMANDS_H_

#include "CLI/CLI.hpp"
#include "client/cli/command_set.h"

namespace kvtier {

// Adds the subcommands to `app` and what they run to `commands`.
void RegisterViewCommands(CLI::App& app, CommandSet* commands);

}  // namespace kvtier

#endif  // KVTIER_CLIENT_CLI_VIEW_COMMANDS_H_
