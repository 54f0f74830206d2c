// pgfleet status: the cluster summary; with --watch, refreshed in place.

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/queries.h"
#include "core/util/text.h"

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

namespace {

// One summary: the cluster and its formations, as a table or as JSON
// (one line of it when `one_line`: --watch --json).
void PrintStatus(pqxx::connection& conn, bool as_json, bool one_line = false) {
  pqxx::work tx(conn);
  json summary = ClusterSummary(tx);
  json formations = FormationStatuses(tx);
  tx.commit();
  if (as_json) {
    const json doc = {{"cluster", summary}, {"formations", formations}};
    if (one_line) {
      std::cout << doc.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    } else {
      PrintJson(doc);
    }
    return;
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
}

}  // namespace

int CmdStatus(const std::vector<std::string>& args) {
  bool watch = false;
  std::string interval_text = "2s";
  int count = 0;
  Command cmd("pgfleet status [--watch [--interval D] [--count N]]", kListing);
  cmd.Options()("watch", po::bool_switch(&watch),
                "refresh every --interval until interrupted: in place on a terminal, else one "
                "summary after another (with --json, one JSON object per line)")(
      "interval", po::value(&interval_text), "with --watch: how often, 100ms to 1h (default 2s)")(
      "count", po::value(&count),
      "with --watch: stop after N refreshes (default: until interrupted)");
  if (!cmd.Parse(args)) return kExitOk;
  double interval = 0;
  try {
    interval = util::ParseSeconds("--interval", interval_text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (interval < 0.1 || interval > 3600) {
    throw UsageError("--interval must be from 100ms to 1h (got \"" + interval_text + "\")");
  }
  if (count < 0 || count > 1000000) {
    throw UsageError("--count must be from 0 to 1000000 (got " + std::to_string(count) + ")");
  }
  if (!watch && (cmd.Given("interval") || cmd.Given("count"))) {
    throw UsageError("--interval and --count need --watch");
  }
  auto conn = cmd.Connect();
  if (!watch) {
    PrintStatus(*conn, cmd.json());
    return kExitOk;
  }
  const bool terminal = ::isatty(STDOUT_FILENO) == 1 && !cmd.json();
  for (int n = 1;; ++n) {
    if (terminal) std::cout << "\033[H\033[2J";  // cursor home, clear: refreshed in place
    if (!cmd.json()) {
      const std::time_t now = std::time(nullptr);
      char at[32];
      std::strftime(at, sizeof at, "%H:%M:%S", std::localtime(&now));
      std::cout << "pgfleet status at " << at << " (every " << interval_text << ")\n";
    }
    PrintStatus(*conn, cmd.json(), true);
    std::cout << std::flush;
    if (count > 0 && n >= count) return kExitOk;
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
  }
}

}  // namespace pgfleet::cli
