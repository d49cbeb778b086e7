// kvtier: the operator's command line for kvtierd.
//   kvtier [--addr A] [--json] [--tls-ca F [--tls-cert F --tls-key F]] [--token-file F]
//   kvtier status | tiers | namespaces | wear | peers | health
//   kvtier blocks --namespace ID [--top N]
//   kvtier evict --namespace ID | --all
//   kvtier watch [--interval S] [--count N]
//   kvtier put FILE [--block-bytes 256KiB]      prints the block keys (hex)
//   kvtier get KEY... -o FILE [--block-bytes N | --namespace ID]
//   kvtier peers
//   kvtier cluster [--namespace ID --owner KEY...]
//   kvtier events [--namespace ID] [--snapshot] [--count N] [--seconds S]
//   kvtier transfer --peer ADDR [--push | --pull] KEY... [--block-bytes N | --namespace ID]
//   kvtier replay TRACE [--model NAME] [--speed N] ...
//   kvtier plan kv|budget|fetch|tiers|pd|preempt|mla|quant|fp8|sharing|strand|state
//     [--model NAME | --model-config FILE] [--gpu NAME] [--tp N] ...  (docs/planner.md)
// Exit status: 0 success, 1 the daemon returned an error or is unreachable,
// 2 bad usage or a local file error.
//
// Each command group registers itself and what it runs (view_commands.h,
// cluster_command.h, events_command.h,
// block_commands.h, replay_command.h, plan_subcommand.h); main parses and
// runs the one named.
#include <cstdio>
#include <exception>

#include "CLI/CLI.hpp"
#include "client/cli/block_commands.h"
#include "client/cli/cluster_command.h"
#include "client/cli/command_set.h"
#include "client/cli/daemon_connection.h"
#include "client/cli/events_command.h"
#include "client/cli/plan_subcommand.h"
#include "client/cli/replay_command.h"
#include "client/cli/view_commands.h"

namespace kvtier {
namespace {

int Run(int argc, char** argv) {
  CLI::App app{"kvtier: inspect and exercise a kvtierd daemon"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags may follow the subcommand: `kvtier status --json`
  Globals g;
  AddGlobalFlags(app, &g);
  // Registration order is the order `kvtier --help` lists them in.
  CommandSet commands;
  RegisterViewCommands(app, &commands);
  RegisterClusterCommand(app, &commands);
  RegisterEventsCommand(app, &commands);
  RegisterBlockCommands(app, &commands);
  RegisterReplayCommand(app, &commands);
  RegisterPlanCommand(app, &commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints and succeeds; every other parse error is bad usage.
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (int rc = ResolveGlobals(&g); rc != 0) return rc;
  return commands.RunParsed(g);
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  try {
    return kvtier::Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtier: fatal: %s\n", e.what());
    return 1;
  }
}
