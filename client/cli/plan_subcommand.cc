#include "client/cli/plan_subcommand.h"

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "client/planner/plan_command.h"

namespace kvtier {

void RegisterPlanCommand(CLI::App& app, CommandSet* commands) {
  std::shared_ptr<planner::PlanCommand> plan = planner::AddPlanCommand(app);
  // Runs without the daemon unless it asks for measured links.
  commands->Add(
      app.get_subcommand("plan"),
      [plan](const Globals& g) {
        if (plan->wants_measured_links()) {
          // The links this daemon measured to its peers, judged beside the
          // catalog's (what the operator has against what the model needs).
          v1::ListPeersResponse r;
          bool printed = false;
          Globals quiet = g;
          quiet.json = false;
          if (int rc = CallAdmin(quiet, "ListPeers", &v1::Admin::Stub::ListPeers, &r, &printed);
              rc != 0) {
            return rc;
          }
          if (r.peers().empty()) {
            std::fprintf(stderr,
                         "kvtier: the daemon at %s has no peers yet; run a transfer first\n",
                         g.addr.c_str());
            return 1;
          }
          for (const v1::PeerStatus& p : r.peers()) {
            if (p.observed_bytes_per_second() <= 0) continue;
            plan->AddMeasuredLink(
                {absl::StrCat("peer ", p.address(), " (measured, ", p.lanes(), ")"),
                 p.observed_bytes_per_second(), 0, "measured by kvtierd"});
          }
        }
        return plan->Run(g.json);
      },
      /*checks_channel=*/false);
}

}  // namespace kvtier
