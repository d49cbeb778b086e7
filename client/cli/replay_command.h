// `kvtier replay TRACE`: registers the replay command (replay.h drives the
// daemon from the trace).
//
// Thread-safety: called once by main's thread before parsing.
#ifndef KVTIER_CLIENT_CLI_REPLAY_COMMAND_H_
#define KVTIER_CLIENT_CLI_REPLAY_COMMAND_H_

#include "CLI/CLI.hpp"
#include "client/cli/command_set.h"

namespace kvtier {

// Adds replay to `app` and what it runs to `commands`.
void RegisterReplayCommand(CLI::App& app, CommandSet* commands);

}  // namespace kvtier

#endif  // KVTIER_CLIENT_CLI_REPLAY_COMMAND_H_
