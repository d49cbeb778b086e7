#include "client/cli/events_command.h"

#include <chrono>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "client/cli/daemon_connection.h"

namespace kvtier {
namespace {

struct EventsFlags {
  std::string ns;
  bool snapshot = false;
  uint64_t count = 0;  // 0: no limit
  double seconds = 0;  // 0: until interrupted
};

void PrintEvent(const v1::BlockEvent& e) {
  std::cout << (e.kind() == v1::BlockEvent::STORED ? "stored " : "removed") << " "
            << (e.medium() == v1::BlockEvent::HOST ? "host" : "nvme") << " " << e.namespace_id()
            << " " << absl::BytesToHexString(e.key()) << " parent "
            << (e.parent().empty() ? "-" : absl::BytesToHexString(e.parent())) << " " << e.size()
            << "\n";
}

int Events(const Globals& g, const EventsFlags& flags) {
  auto stub = v1::Admin::NewStub(Connect(g));
  grpc::ClientContext ctx;
  if (flags.seconds > 0) {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(flags.seconds * 1000)));
  }
  v1::WatchBlocksRequest request;
  request.set_namespace_id(flags.ns);
  request.set_snapshot(flags.snapshot);
  std::unique_ptr<grpc::ClientReader<v1::BlockEvents>> reader = stub->WatchBlocks(&ctx, request);
  v1::BlockEvents msg;
  uint64_t seen = 0;
  while (reader->Read(&msg)) {
    if (g.json) {
      PrintJson(msg);
      seen += static_cast<uint64_t>(msg.events_size());
    } else {
      for (const v1::BlockEvent& e : msg.events()) {
        PrintEvent(e);
        ++seen;
      }
      if (msg.snapshot_done()) std::cout << "-- snapshot done; live changes follow\n";
    }
    std::cout.flush();
    if (flags.count > 0 && seen >= flags.count) {
      ctx.TryCancel();
      break;
    }
  }
  const grpc::Status s = reader->Finish();
  const bool ended_by_us = (flags.count > 0 && seen >= flags.count) ||
                           (flags.seconds > 0 && s.error_code() == grpc::DEADLINE_EXCEEDED);
  if (!s.ok() && !ended_by_us) return RpcFailed(g, "WatchBlocks", s);
  return 0;
}

}  // namespace

void RegisterEventsCommand(CLI::App& app, CommandSet* commands) {
  auto flags = std::make_shared<EventsFlags>();
  auto* events = app.add_subcommand(
      "events", "stream the blocks entering and leaving the daemon's tiers (Admin.WatchBlocks)");
  events->add_option("--namespace", flags->ns, "only this namespace (hex id)");
  events->add_flag("--snapshot", flags->snapshot, "first every block held now");
  events->add_option("--count", flags->count, "stop after this many events");
  events->add_option("--seconds", flags->seconds, "stop after this many seconds");
  commands->Add(events, [flags](const Globals& g) { return Events(g, *flags); });
}

}  // namespace kvtier
