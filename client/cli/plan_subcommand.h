// `kvtier plan ...`: registers the planner's command (client/planner/) and,
// for `plan pd --peers`, feeds it the links the daemon at --addr measured
// to its peers. The other plan reports need no daemon.
//
// Thread-safety: called once by main's thread before parsing.
#ifndef KVTIER_CLIENT_CLI_PLAN_SUBCOMMAND_H_
#define KVTIER_CLIENT_CLI_PLAN_SUBCOMMAND_H_

#include "CLI/CLI.hpp"
#include "client/cli/command_set.h"

namespace kvtier {

// Adds plan to `app` and what it runs to `commands`.
void RegisterPlanCommand(CLI::App& app, CommandSet* commands);

}  // namespace kvtier

#endif  // KVTIER_CLIENT_CLI_PLAN_SUBCOMMAND_H_
