// pgfleet ps | inspect | stop: listing, examining and cancelling jobs.

#include <iostream>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/queries.h"

namespace pgfleet::cli {
namespace {

using nlohmann::json;

void PrintJobTable(const std::vector<JobRow>& jobs) {
  std::vector<std::vector<std::string>> table;
  for (const auto& j : jobs) {
    std::string cmd = j.command;
    if (cmd.size() > 40) cmd = cmd.substr(0, 37) + "...";
    table.push_back({std::to_string(j.id), j.formation, std::string(model::ToString(j.state)),
                     std::to_string(j.attempt), j.host_id, std::to_string(j.cpu) + "m",
                     std::to_string(j.memory) + "Mi", j.created, cmd, j.error});
  }
  PrintTable({"ID", "FORMATION", "STATE", "ATTEMPT", "HOST", "CPU", "MEMORY", "CREATED", "COMMAND",
              "REASON"},
             table);
}

// inspect's text form: the row's fields by name, its events, its output tail.
void PrintJobDocument(const json& job) {
  for (auto& [k, v] : job.items()) {
    if (k == "events" || k == "output_tail") continue;
    std::cout << k << ": " << (v.is_string() ? v.get<std::string>() : v.dump()) << "\n";
  }
  std::cout << "events:\n";
  for (auto& e : job["events"]) {
    std::cout << "  " << e["at"].get<std::string>() << "  attempt " << e["attempt"] << "  "
              << e["kind"].get<std::string>();
    if (e["host_id"].is_string()) std::cout << "  host=" << e["host_id"].get<std::string>();
    if (e["detail"].is_string()) std::cout << "  " << e["detail"].get<std::string>();
    std::cout << "\n";
  }
  if (job["output_tail"].is_string())
    std::cout << "output (last 4 KiB):\n" << job["output_tail"].get<std::string>();
}

}  // namespace

int CmdPs(const std::vector<std::string>& args) {
  JobFilter filter;
  Command cmd("pgfleet ps [--all] [--formation F] [--limit N]", kListing);
  cmd.Options()("all,a", po::bool_switch(&filter.all), "include finished jobs")(
      "formation", po::value(&filter.formation), "only this formation")(
      "limit", po::value(&filter.limit), "at most N jobs, newest first (default 100)");
  if (!cmd.Parse(args)) return kExitOk;
  if (filter.limit <= 0) {
    throw UsageError("--limit must be > 0 (got " + std::to_string(filter.limit) + ")");
  }
  auto conn = cmd.Connect();
  pqxx::work tx(*conn);
  auto jobs = ListJobs(tx, filter);
  if (cmd.json()) {
    json out = json::array();
    for (const auto& j : jobs) out.push_back(json::parse(j.json));
    PrintJson(out);
    return kExitOk;
  }
  PrintJobTable(jobs);
  return kExitOk;
}

int CmdInspect(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  Command cmd("pgfleet inspect JOB", kListing);
  cmd.Positional("job", &pos);
  if (!cmd.Parse(args)) return kExitOk;
  if (pos.size() != 1) throw UsageError("expected exactly one JOB");
  int64_t id = ParseJobId(pos[0]);
  auto conn = cmd.Connect();
  pqxx::work tx(*conn);
  auto job = InspectJob(tx, id);
  if (!job) {
    std::cerr << "pgfleet inspect: job " << id << " does not exist\n";
    return kExitFailure;
  }
  if (cmd.json()) {
    PrintJson(*job);
    return kExitOk;
  }
  PrintJobDocument(*job);
  return kExitOk;
}

int CmdStop(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  Command cmd("pgfleet stop JOB...", kText);
  cmd.Positional("job", &pos);
  if (!cmd.Parse(args)) return kExitOk;
  if (pos.empty()) throw UsageError("expected at least one JOB");
  std::vector<int64_t> ids;
  for (const auto& p : pos) ids.push_back(ParseJobId(p));
  auto conn = cmd.Connect();
  for (int64_t id : ids) {
    pqxx::work tx(*conn);
    std::string result = CancelJob(tx, id);
    tx.commit();
    std::cout << id << " " << result << "\n";
  }
  return kExitOk;
}

}  // namespace pgfleet::cli
