// pgfleet ps | inspect | stop: listing, examining and cancelling jobs.

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/queries.h"
#include "core/util/text.h"

namespace pgfleet::cli {
namespace {

using nlohmann::json;

std::string Dash(const std::string& s) { return s.empty() ? "-" : s; }

void PrintJobTable(const std::vector<JobRow>& jobs) {
  std::vector<std::vector<std::string>> table;
  for (const auto& j : jobs) {
    std::string cmd = j.command;
    if (cmd.size() > 40) cmd = cmd.substr(0, 37) + "...";
    table.push_back({std::to_string(j.id), j.formation, std::string(model::ToString(j.state)),
                     Dash(j.health), std::to_string(j.attempt), j.host_id,
                     std::to_string(j.cpu) + "m", std::to_string(j.memory) + "Mi", Dash(j.cpu_used),
                     Dash(j.memory_used), j.created, cmd, j.error});
  }
  // CPU and MEMORY: what the job asked for; USED: what it uses now.
  // HEALTH: what its health checks found ("-": it has none).
  PrintTable({"ID", "FORMATION", "STATE", "HEALTH", "ATTEMPT", "HOST", "CPU", "MEMORY", "CPU USED",
              "MEM USED", "CREATED", "COMMAND", "REASON"},
             table);
}

// inspect's text form: what a reader asks first (state, exit, error), then
// the row's other fields by name, its events, its output tail.
void PrintJobDocument(const json& job) {
  static const std::vector<std::string> kFirst = {"id",      "state",  "exit_code", "signal",
                                                  "error",   "health", "health_at", "health_output",
                                                  "attempt", "host_id"};
  auto print = [](const std::string& k, const json& v) {
    std::cout << k << ": " << Printable(v.is_string() ? v.get<std::string>() : v.dump()) << "\n";
  };
  for (const auto& k : kFirst) {
    if (job.contains(k)) print(k, job[k]);
  }
  // What a running attempt uses now, beside what it asked for.
  if (job.contains("cpu_used") && job["cpu_used"].is_number()) {
    char line[160];
    std::snprintf(line, sizeof line, "in use: %.2f cores (asked %sm), %.1f MiB (asked %s MiB)",
                  job["cpu_used"].get<double>(), job["cpu"].dump().c_str(),
                  job.value("memory_used_bytes", 0.0) / 1048576.0, job["memory"].dump().c_str());
    std::cout << line << ", measured at " << job.value("usage_at", std::string("?")) << "\n";
  }
  for (auto& [k, v] : job.items()) {
    if (k == "events" || k == "output_tail") continue;
    if (k == "files" && v.is_object()) {  // the paths, not the contents (--json has them)
      std::string line;
      for (auto& [path, f] : v.items()) {
        line += (line.empty() ? "" : ", ") + path + " (" + f.value("mode", std::string("0644")) +
                (f.value("base64", false) ? ", base64" : "") + ")";
      }
      print(k, line);
      continue;
    }
    if (std::find(kFirst.begin(), kFirst.end(), k) != kFirst.end()) continue;
    print(k, v);
  }
  std::cout << "events:\n";
  for (auto& e : job["events"]) {
    std::cout << "  " << e["at"].get<std::string>() << "  attempt " << e["attempt"] << "  "
              << e["kind"].get<std::string>();
    if (e["host_id"].is_string()) std::cout << "  host=" << e["host_id"].get<std::string>();
    if (e["detail"].is_string()) std::cout << "  " << Printable(e["detail"].get<std::string>());
    std::cout << "\n";
  }
  if (job["output_tail"].is_string())
    std::cout << "output (last 4 KiB):\n" << Printable(job["output_tail"].get<std::string>(), true);
}

}  // namespace

int CmdPs(const std::vector<std::string>& args) {
  JobFilter filter;
  std::string since;
  Command cmd(
      "pgfleet ps [--all] [--state S] [--since DURATION] [--formation F] [--host H] [--limit N]",
      kListing);
  cmd.Options()("all,a", po::bool_switch(&filter.all), "include finished jobs")(
      "state", po::value(&filter.state),
      "only jobs in this state (pending, assigned, running, succeeded, failed, cancelled)")(
      "since", po::value(&since), "only jobs created within this long (e.g. 30s, 10m, 2h, 7d)")(
      "formation", po::value(&filter.formation), "only this formation")(
      "host", po::value(&filter.host), "only jobs placed on this host")(
      "limit", po::value(&filter.limit), "at most N jobs, newest first (default 100)");
  if (!cmd.Parse(args)) return kExitOk;
  if (filter.limit <= 0) {
    throw UsageError("--limit must be > 0 (got " + std::to_string(filter.limit) + ")");
  }
  if (cmd.Given("state") && !model::ParseJobState(filter.state)) {
    throw UsageError(
        "--state must be pending, assigned, running, succeeded, failed or cancelled (got \"" +
        filter.state + "\")");
  }
  if (cmd.Given("since")) {
    try {
      filter.since_seconds = util::ParseSeconds("--since", since);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
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
  bool force = false;
  Command cmd("pgfleet stop [--force] JOB...", kText);
  cmd.Options()("force", po::bool_switch(&force),
                "kill at once (SIGKILL), without waiting out the job's stop_grace_seconds");
  cmd.Positional("job", &pos);
  if (!cmd.Parse(args)) return kExitOk;
  if (pos.empty()) throw UsageError("expected at least one JOB");
  std::vector<int64_t> ids;
  for (const auto& p : pos) ids.push_back(ParseJobId(p));
  auto conn = cmd.Connect();
  for (int64_t id : ids) {
    pqxx::work tx(*conn);
    std::string result = CancelJob(tx, id, force);
    tx.commit();
    std::cout << id << " " << result << "\n";
  }
  return kExitOk;
}

}  // namespace pgfleet::cli
