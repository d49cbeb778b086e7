// `kvtier plan SUBCOMMAND`: the operator's planner. Resolves the common
// flags (model, GPU, parallelism, KV dtype, block size, MFU) into a
// costmodel::Deployment, runs one report and prints its text or JSON.
//
// Thread-safety: single-threaded CLI code.
#ifndef KVTIER_CLIENT_PLANNER_PLAN_COMMAND_H_
#define KVTIER_CLIENT_PLANNER_PLAN_COMMAND_H_

#include <memory>

#include "CLI/CLI.hpp"
#include "costmodel/hardware.h"

namespace kvtier::planner {

class PlanCommand {
 public:
  virtual ~PlanCommand() = default;
  // True when the user ran `plan` (any subcommand).
  virtual bool parsed() const = 0;
  // Prints the report; 0 on success, 2 for bad input (message on stderr).
  virtual int Run(bool json) = 0;
  // `plan pd --peers`: the caller adds the links the daemon measured (one
  // per peer) before Run, and they are judged beside the catalog links.
  virtual bool wants_measured_links() const = 0;
  virtual void AddMeasuredLink(costmodel::LinkSpec link) = 0;
};

// Registers `plan` and its subcommands on `app`.
std::unique_ptr<PlanCommand> AddPlanCommand(CLI::App& app);

}  // namespace kvtier::planner

#endif  // KVTIER_CLIENT_PLANNER_PLAN_COMMAND_H_
