// `kvtier events`: the blocks entering and leaving the daemon's tiers, one
// line per event, as Admin.WatchBlocks streams them (optionally after a
// snapshot of what it holds): for an operator checking what a router sees.
//
// Thread-safety: registered and run by main's thread.
#ifndef KVTIER_CLIENT_CLI_EVENTS_COMMAND_H_
#define KVTIER_CLIENT_CLI_EVENTS_COMMAND_H_

#include "CLI/CLI.hpp"
#include "client/cli/command_set.h"

namespace kvtier {

void RegisterEventsCommand(CLI::App& app, CommandSet* commands);

}  // namespace kvtier

#endif  // KVTIER_CLIENT_CLI_EVENTS_COMMAND_H_
