#include "client/cli/replay_command.h"

#include <memory>

#include "client/cli/replay.h"

namespace kvtier {

void RegisterReplayCommand(CLI::App& app, CommandSet* commands) {
  auto o = std::make_shared<ReplayOptions>();
  auto* replay =
      app.add_subcommand("replay", "drive the daemon like an engine from a Mooncake trace");
  replay->add_option("TRACE", o->trace, "JSONL trace (timestamp, input_length, hash_ids)")
      ->required();
  replay->add_option("--model", o->model, "catalog model: layout and plans")->capture_default_str();
  replay->add_option("--gpu", o->gpu, "catalog GPU for the prefill estimate")
      ->capture_default_str();
  replay->add_option("--block-bytes", o->block_bytes, "bytes stored per trace block")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  replay
      ->add_option("--speed", o->speed,
                   "0: as fast as possible; N: honour timestamps compressed N times")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  replay->add_option("--limit", o->limit, "replay only the first N requests");
  replay->add_flag("!--no-progress", o->progress, "no progress bar");
  commands->Add(replay, [o](const Globals& g) {
    ReplayOptions options = *o;
    options.address = g.addr;
    options.credentials = g.credentials;
    options.json = g.json;
    return RunReplay(options);
  });
}

}  // namespace kvtier
