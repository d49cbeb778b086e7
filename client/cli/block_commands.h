// The commands of `kvtier` that move blocks through the C++ client library
// (kvtier::client::Client): put (a file as a chain of blocks; prints their
// keys), get (blocks by key into a file) and transfer (blocks between this
// daemon and a peer daemon).
//
// Thread-safety: called once by main's thread before parsing.
#ifndef KVTIER_CLIENT_CLI_BLOCK_COMMANDS_H_
#define KVTIER_CLIENT_CLI_BLOCK_COMMANDS_H_

#include "CLI/CLI.hpp"
#include "client/cli/command_set.h"

namespace kvtier {

// Adds put, get and transfer to `app` and what they run to `commands`.
void RegisterBlockCommands(CLI::App& app, CommandSet* commands);

}  // namespace kvtier

#endif  // KVTIER_CLIENT_CLI_BLOCK_COMMANDS_H_
