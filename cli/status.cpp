// pgfleet status: the cluster summary.

#include <iostream>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/queries.h"

namespace pgfleet::cli {
namespace {

using nlohmann::json;

void PrintSummary(const json& summary) {
  std::cout << "hosts: " << summary["hosts_up"] << " up of " << summary["hosts_total"]
            << "   schedulers: " << summary["schedulers"] << "\n"
            << "cpu: " << summary["cpu_allocated"] << "m of " << summary["cpu_total"]
            << "m allocated"
            << "   memory: " << summary["memory_allocated"] << " of " << summary["memory_total"]
            << " MiB\n"
            << "jobs: " << summary["jobs_pending"] << " pending, " << summary["jobs_assigned"]
            << " assigned, " << summary["jobs_running"] << " running, " << summary["jobs_succeeded"]
            << " succeeded, " << summary["jobs_failed"] << " failed, " << summary["jobs_cancelled"]
            << " cancelled\n\n";
}

}  // namespace

int CmdStatus(const std::vector<std::string>& args) {
  Command cmd("pgfleet status", kListing);
  if (!cmd.Parse(args)) return kExitOk;
  auto conn = cmd.Connect();
  pqxx::work tx(*conn);
  json summary = ClusterSummary(tx);
  json formations = FormationStatuses(tx);
  if (cmd.json()) {
    PrintJson({{"cluster", summary}, {"formations", formations}});
    return kExitOk;
  }
  PrintSummary(summary);
  std::vector<std::vector<std::string>> table;
  for (auto& x : formations) {
    table.push_back({x["name"].get<std::string>(), x["kind"].get<std::string>(),
                     x["desired"].is_null() ? "-" : x["desired"].dump(), x["pending"].dump(),
                     x["assigned"].dump(), x["running"].dump(), x["succeeded"].dump(),
                     x["failed"].dump(), x["cancelled"].dump(), HealthCounts(x)});
  }
  PrintTable({"FORMATION", "KIND", "DESIRED", "PENDING", "ASSIGNED", "RUNNING", "SUCCEEDED",
              "FAILED", "CANCELLED", "HEALTHY/UNHEALTHY"},
             table);
  return kExitOk;
}

}  // namespace pgfleet::cli
