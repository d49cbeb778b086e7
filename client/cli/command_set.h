// CommandSet: the subcommands of `kvtier`, each registered with what it runs
// once parsed. Every command group adds itself (Register...Commands) before
// parsing; after parsing, main runs the one the user named.
//
// Thread-safety: externally synchronized (built and run by main's thread).
#ifndef KVTIER_CLIENT_CLI_COMMAND_SET_H_
#define KVTIER_CLIENT_CLI_COMMAND_SET_H_

#include <functional>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "client/cli/daemon_connection.h"

namespace kvtier {

class CommandSet {
 public:
  // Runs a parsed command with the resolved global flags; returns the exit
  // status (0 success, 1 daemon error or unreachable, 2 bad usage).
  using Run = std::function<int(const Globals&)>;

  // `checks_channel`: the command talks to the daemon at --addr, so bad TLS
  // files are reported (exit 2) before it runs.
  void Add(CLI::App* subcommand, Run run, bool checks_channel = true) {
    commands_.push_back({subcommand, std::move(run), checks_channel});
  }

  // Runs the parsed command; 2 when none was parsed.
  int RunParsed(const Globals& g) const {
    for (const Command& c : commands_) {
      if (!c.subcommand->parsed()) continue;
      // Bad TLS files are a usage error, reported once, before any command.
      if (c.checks_channel && Connect(g) == nullptr) return 2;
      return c.run(g);
    }
    return 2;
  }

 private:
  struct Command {
    CLI::App* subcommand;
    Run run;
    bool checks_channel;
  };
  std::vector<Command> commands_;
};

}  // namespace kvtier

#endif  // KVTIER_CLIENT_CLI_COMMAND_SET_H_
