#include "client/cli/view_commands.h"

#include <cstdint>
#include <memory>
#include <string>

#include "client/cli/operator_views.h"

namespace kvtier {

void RegisterViewCommands(CLI::App& app, CommandSet* commands) {
  commands->Add(app.add_subcommand("status", "daemon status and counters"), Status);
  commands->Add(app.add_subcommand("tiers", "capacity and use of each tier"), Tiers);
  commands->Add(app.add_subcommand("namespaces", "open namespaces"), Namespaces);
  commands->Add(app.add_subcommand("wear", "SSD write budget, wear-out projection and SMART"),
                Wear);
  commands->Add(app.add_subcommand("peers", "peer daemons: transport, bytes moved, bandwidth"),
                Peers);
  commands->Add(
      app.add_subcommand("health", "gRPC health check (exit 0 when serving); needs no credentials"),
      Health);

  struct BlocksFlags {
    std::string ns;
    uint32_t top = 20;
  };
  auto b = std::make_shared<BlocksFlags>();
  auto* blocks = app.add_subcommand("blocks", "the most used blocks of a namespace");
  blocks->add_option("--namespace", b->ns, "namespace id (see `kvtier namespaces`)")->required();
  blocks->add_option("--top", b->top, "how many blocks (1..10000)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  commands->Add(blocks, [b](const Globals& g) { return Blocks(g, b->ns, b->top); });

  struct EvictFlags {
    std::string ns;
    bool all = false;
    bool progress = true;
  };
  auto e = std::make_shared<EvictFlags>();
  auto* evict = app.add_subcommand(
      "evict", "drop a namespace's unpinned blocks from every tier (progress on stderr)");
  evict->add_option("--namespace", e->ns, "namespace id");
  evict->add_flag("--all", e->all, "every namespace");
  evict->add_flag("!--no-progress", e->progress, "no progress bar");
  commands->Add(evict, [e](const Globals& g) { return Evict(g, e->ns, e->all, e->progress); });

  struct WatchFlags {
    double interval_s = 2;
    int count = 0;
  };
  auto w = std::make_shared<WatchFlags>();
  auto* watch = app.add_subcommand("watch", "a summary and the tier table, refreshed");
  watch->add_option("--interval", w->interval_s, "seconds between refreshes")
      ->capture_default_str();
  watch->add_option("--count", w->count, "stop after N refreshes (0: never)")
      ->capture_default_str();
  commands->Add(watch, [w](const Globals& g) { return Watch(g, w->interval_s, w->count); });
}

}  // namespace kvtier
