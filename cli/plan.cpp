// pgfleet plan: where a pending job (--job) or a spec not submitted (run's
// flags) would be placed now and, for every other host, why not, counted by
// kind. It runs the scheduler's own placement core (core/placement/explain.h)
// on the hosts as a pass's snapshot would read them (pgfleet.placement_hosts).
// A spec is checked by inserting it in a transaction that is rolled back, so
// it is refused exactly as `pgfleet run` would refuse it and nothing stays.

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/queries.h"
#include "cli/plan_queries.h"
#include "core/placement/explain.h"

namespace pgfleet::cli {
namespace {

using nlohmann::json;

json ToJson(const placement::Explanation& e, const std::map<std::string, int>& not_up) {
  json rejected = json::array();
  for (const auto& c : e.rejected) {
    json r = {{"hosts", c.hosts}, {"kind", placement::KindName(c.kind)}, {"detail", c.detail},
              {"reason", placement::CountText(c)}};
    if (c.kind == placement::Rejection::kCpu || c.kind == placement::Rejection::kMemory) {
      r["largest_free"] = c.largest_free;
    }
    if (c.kind == placement::Rejection::kPreemption) r["victims"] = std::stoi(c.detail);
    rejected.push_back(std::move(r));
  }
  return {{"host", e.host.empty() ? json() : json(e.host)},
          {"rank", e.rank},
          {"ports", e.ports},
          {"feasible", e.feasible},
          {"reason", e.reason.empty() ? json() : json(e.reason)},
          {"never_fits", e.never_fits},
          {"not_on", rejected},
          {"not_up", not_up}};
}

}  // namespace

int CmdPlan(const std::vector<std::string>& all_args) {
  auto [args, command] = SplitAtDoubleDash(all_args);
  int64_t job = 0;
  std::string job_arg;
  bool as_json = false;
  model::JobSpec spec;
  HealthFlags health;
  std::vector<std::string> envs, constraints, ports, positional;
  Command cmd("pgfleet plan --job JOB | pgfleet plan [run's options] -- CMD ARG...", kText);
  cmd.Options()("job", po::value(&job_arg), "a pending job (yours, unless you see every job)")(
      "json", po::bool_switch(&as_json), "print JSON instead of text")(
      "formation", po::value(&spec.formation), "formation (default: default)");
  AddJobTemplateOptions(cmd, &spec, &envs, &constraints, &ports, &health);
  cmd.Positional("command", &positional);
  if (!cmd.Parse(args)) return kExitOk;
  if (!command.empty() && !positional.empty()) {
    throw UsageError("unexpected argument \"" + positional[0] + "\" before --");
  }
  if (command.empty()) command = positional;

  auto conn = cmd.Connect();
  pqxx::work tx(*conn);
  Planned planned;
  if (cmd.Given("job")) {
    if (std::string other = cmd.GivenOtherThan({"job", "json"}); !other.empty() || !command.empty()) {
      throw UsageError("--job plans a job already submitted: give either --job or a spec (" +
                       (other.empty() ? std::string("-- CMD") : "--" + other) + " was given too)");
    }
    job = ParseJobId(job_arg);
    planned = ReadPlacementRequest(tx, job);
    if (planned.state != "pending") {
      throw std::runtime_error("job " + std::to_string(job) + " is " + planned.state +
                               ", not pending: plan says where a pending job would go (`pgfleet "
                               "inspect " + std::to_string(job) + "` says where it is)");
    }
  } else {
    if (command.empty()) throw UsageError("expected --job JOB, or a command after --");
    spec.command = command;
    CompleteSpec(envs, constraints, ports, health, &spec);
    // Inserted as `run` would insert it, so the database's rules refuse it
    // or give it its defaults and privilege; rolled back below.
    const int64_t id = Submit(tx, spec, "");
    planned = ReadPlacementRequest(tx, id);
    planned.request.id = 0;
  }
  const Fleet fleet = ReadPlacementHosts(tx, planned);
  tx.abort();  // nothing planned is written; a spec's insert is undone

  placement::Explanation e =
      placement::ExplainJob(planned.request, fleet.hosts, fleet.running, &fleet.preemption);
  for (const auto& [why, n] : fleet.not_up) placement::AddNotUp(&e, why, n);
  if (as_json) {
    std::cout << ToJson(e, fleet.not_up).dump(2) << "\n";
  } else {
    std::cout << placement::ExplanationText(e);
  }
  return kExitOk;
}

}  // namespace pgfleet::cli
