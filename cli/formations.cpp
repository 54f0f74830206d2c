// pgfleet formation create | scale | done | delete | list: managing
// formations (a service keeps N replicas running; a system formation one on
// every eligible host; a sysbatch formation runs once on every eligible host
// until it is done; a cron formation runs once per due time of its schedule;
// a batch formation groups jobs).

#include <cctype>
#include <iostream>

#include "cli/command.h"
#include "cli/formation_versions.h"
#include "cli/output.h"
#include "cli/queries.h"

namespace pgfleet::cli {
namespace {

// Every flag `formation` takes (each subcommand accepts them all).
struct FormationFlags {
  std::vector<std::string> pos, envs, constraints, ports;
  HealthFlags health;
  NewFormation f;
  RolloutFlags rollout;
  LimitFlags limits;
};

// The subcommands, with their usage lines (also `pgfleet formation --help`).
const char* kFormationUsage =
    "usage: pgfleet formation SUBCOMMAND\n"
    "  create NAME [--kind K] [--replicas N] [--spread KEY] [job options] -- CMD ARG...\n"
    "                 a service keeps N replicas of CMD running; a batch formation groups jobs\n"
    "  create NAME --kind cron --cron EXPR --time-zone ZONE [options] -- CMD ARG...\n"
    "                 run CMD once per due time of EXPR, e.g. '0 3 * * *' (docs/cron.md)\n"
    "  update NAME [options] [-- CMD ARG...]\n"
    "                 change its template (a new version, rolled out) or settings\n"
    "  status NAME    its jobs, version and rollouts; a cron formation's next and last runs\n"
    "  history NAME   its versions\n"
    "  revert NAME VERSION\n"
    "                 roll back to an earlier version\n"
    "  promote NAME   let a rollout waiting on its canaries go on\n"
    "  scale NAME N   a service's replicas\n"
    "  done NAME      a sysbatch formation: hosts that join from now on get no job of it\n"
    "  delete NAME    stop its jobs and delete it (their history stays)\n"
    "  list           every formation with its jobs by state\n"
    "`pgfleet formation SUBCOMMAND --help` lists a subcommand's options.\n";

// Each subcommand's own options: create takes the template's, the others none.
void AddFormationOptions(Command& cmd, const std::string& sub, FormationFlags* flags) {
  if (sub == "create") {
    cmd.Options()("kind", po::value(&flags->f.kind),
                  "service, system (one replica on every eligible host), sysbatch (run once on "
                  "every eligible host, and on each that joins until `formation done`), cron (run "
                  "once per due time of --cron) or batch (default batch)");
    cmd.Options()("replicas", po::value(&flags->f.replicas), "service: copies to keep running")(
        "max-attempts", po::value(&flags->f.job.max_attempts),
        "sysbatch and cron: runs of each job before it stays failed (default 1)")(
        "spread", po::value(&flags->f.spread),
        "spread its jobs: host (one per host first) or a host label key, e.g. zone "
        "(evenly over its values); default: packed onto the fewest hosts");
    cmd.Options()("cron", po::value(&flags->f.cron),
                  "cron: when to run, 5 fields minute hour day-of-month month day-of-week, "
                  "e.g. '0 3 * * *', or @hourly, @daily, @weekly, @monthly, @yearly")(
        "time-zone", po::value(&flags->f.time_zone),
        "cron: the IANA time zone --cron is read in, e.g. Europe/Paris or UTC (required)")(
        "overlap", po::value(&flags->f.overlap),
        "cron: while an earlier run is live, skip the new one, allow both, or cancel_previous "
        "(default skip)")("catch-up", po::value(&flags->f.catch_up),
                          "cron: after schedulers were down, run at most this many of the latest "
                          "missed due times, 1-100 (default 1)");
    AddRolloutOptions(cmd, &flags->rollout);
    AddLimitOptions(cmd, &flags->limits);
    // A formation's template is a whole job: every flag of `run` that says how
    // a job runs says it for each replica.
    AddJobTemplateOptions(cmd, &flags->f.job, &flags->envs, &flags->constraints, &flags->ports, &flags->health);
  }
  cmd.Positional("args", &flags->pos);
}

const char* UsageOf(const std::string& sub) {
  if (sub == "create") return "pgfleet formation create NAME [options] -- CMD ARG...";
  if (sub == "scale") return "pgfleet formation scale NAME N";
  if (sub == "delete") return "pgfleet formation delete NAME";
  if (sub == "done") return "pgfleet formation done NAME";
  return "pgfleet formation list";
}

int List(pqxx::connection& conn, bool as_json) {
  pqxx::work tx(conn);
  auto out = FormationStatuses(tx);
  if (as_json) {
    PrintJson(out);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> table;
  for (auto& x : out) {
    // A sysbatch formation marked done says so beside its kind.
    std::string kind = x["kind"].get<std::string>();
    if (x.contains("done_at") && !x["done_at"].is_null()) kind += " (done)";
    table.push_back({x["name"].get<std::string>(), kind,
                     x["desired"].is_null() ? "-" : x["desired"].dump(), x["pending"].dump(),
                     x["running"].dump(), x["succeeded"].dump(), x["failed"].dump(),
                     HealthCounts(x)});
  }
  PrintTable(
      {"NAME", "KIND", "DESIRED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "HEALTHY/UNHEALTHY"},
      table);
  return kExitOk;
}

// `formation scale NAME N`: N from its word; throws UsageError.
int ParseReplicas(const std::vector<std::string>& pos) {
  if (pos.size() != 2) throw UsageError("expected: formation scale NAME N");
  int n = 0;
  size_t used = 0;
  try {
    n = std::stoi(pos[1], &used);
  } catch (const std::exception&) {
    used = 0;
  }
  // The whole word: "3x" is not 3.
  if (used == 0 || used != pos[1].size() || !std::isdigit(static_cast<unsigned char>(pos[1][0])))
    throw UsageError("replicas must be a whole number >= 0 (got \"" + pos[1] + "\")");
  return n;
}

// A cron formation's flags (the expression's rules are the database's:
// pgfleet.cron_problem names the field); throws UsageError.
void CheckCron(const Command& cmd, const NewFormation& f) {
  if (f.kind != "cron") {
    for (const char* flag : {"cron", "time-zone", "overlap", "catch-up"}) {
      if (cmd.Given(flag))
        throw UsageError(std::string("--") + flag + " is for --kind cron only (got --kind " +
                         f.kind + ")");
    }
    return;
  }
  if (f.cron.empty()) throw UsageError("a cron formation needs --cron, e.g. --cron '0 3 * * *'");
  if (f.time_zone.empty())
    throw UsageError("a cron formation needs --time-zone, an IANA name such as Europe/Paris or UTC");
  if (f.overlap != "skip" && f.overlap != "allow" && f.overlap != "cancel_previous")
    throw UsageError("--overlap must be skip, allow or cancel_previous (got \"" + f.overlap + "\")");
  if (f.catch_up < 1 || f.catch_up > 100)
    throw UsageError("--catch-up must be between 1 and 100 (got " + std::to_string(f.catch_up) +
                     ")");
}

// Checks `formation create`'s words and completes flags->f; throws UsageError.
void CheckCreate(const Command& cmd, FormationFlags* flags, const std::vector<std::string>& command) {
  NewFormation& f = flags->f;
  if (flags->pos.size() != 1) {
    throw UsageError("expected: formation create NAME [options] -- CMD ARG...");
  }
  f.name = flags->pos[0];
  if (f.kind != "service" && f.kind != "batch" && f.kind != "system" && f.kind != "sysbatch" &&
      f.kind != "cron")
    throw UsageError("--kind must be service, batch, system, sysbatch or cron (got \"" + f.kind +
                     "\")");
  CheckCron(cmd, f);
  if (f.replicas < 0)
    throw UsageError("--replicas must be >= 0 (got " + std::to_string(f.replicas) + ")");
  if (f.kind != "batch" && command.empty())
    throw UsageError("a " + f.kind + " formation needs a command after --");
  // The rules apply to the template as to a job; a batch template may have no command.
  f.job.command = command.empty() ? std::vector<std::string>{"placeholder"} : command;
  CompleteSpec(flags->envs, flags->constraints, flags->ports, flags->health, &f.job);
  f.job.command = command;
}

}  // namespace

int CmdFormation(const std::vector<std::string>& all_args) {
  if (!all_args.empty() &&
      (all_args[0] == "--help" || all_args[0] == "-h" || all_args[0] == "help")) {
    std::cout << kFormationUsage;
    return kExitOk;
  }
  if (all_args.empty() ||
      (all_args[0] != "create" && all_args[0] != "scale" && all_args[0] != "done" &&
       all_args[0] != "delete" && all_args[0] != "list" && !IsVersionSubcommand(all_args[0]))) {
    std::string got = all_args.empty() ? "no subcommand" : "\"" + all_args[0] + "\"";
    throw UsageError(
        "expected create, update, status, history, revert, promote, scale, done, delete or list "
        "(got " +
        got + ")");
  }
  const std::string sub = all_args[0];
  auto [args, command] =
      SplitAtDoubleDash(std::vector<std::string>(all_args.begin() + 1, all_args.end()));
  if (IsVersionSubcommand(sub)) return CmdFormationVersions(sub, args, command);
  FormationFlags flags;
  Command cmd(UsageOf(sub), sub == "list" ? kListing : kText);
  AddFormationOptions(cmd, sub, &flags);
  if (!cmd.Parse(args)) return kExitOk;
  if (sub == "list") {
    auto conn = cmd.Connect();
    return List(*conn, cmd.json());
  }
  if (sub == "scale") {
    int n = ParseReplicas(flags.pos);
    auto conn = cmd.Connect();
    pqxx::work tx(*conn);
    ScaleFormation(tx, flags.pos[0], n);
    tx.commit();
    std::cout << flags.pos[0] << " scaled to " << n << "\n";
    return kExitOk;
  }
  if (sub == "done" || sub == "delete") {
    if (flags.pos.size() != 1) throw UsageError("expected: formation " + sub + " NAME");
    auto conn = cmd.Connect();
    pqxx::work tx(*conn);
    std::string said = sub == "done" ? "done since " + FormationDone(tx, flags.pos[0])
                                     : DeleteFormation(tx, flags.pos[0]);
    tx.commit();
    std::cout << flags.pos[0] << " " << said << "\n";
    return kExitOk;
  }
  CheckCreate(cmd, &flags, command);
  auto rollout = RolloutChanges(cmd, flags.rollout);
  if (flags.limits.max_running == "none") {
    throw UsageError(
        "--max-running none is for formation update (a new formation is unlimited "
        "without it)");
  }
  AddLimitChanges(cmd, flags.limits, &rollout);
  auto conn = cmd.Connect();
  pqxx::work tx(*conn);
  int id = CreateFormation(tx, flags.f);
  if (!rollout.empty()) UpdateFormation(tx, flags.f.name, rollout);
  tx.commit();
  std::cout << flags.f.name << " created (id " << id << ")\n";
  return kExitOk;
}

}  // namespace pgfleet::cli
