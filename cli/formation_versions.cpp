// pgfleet formation update | history | revert | promote | status: a
// formation's versions and rollouts (sql/022_versions.sql). A change of the
// job template makes a new version, which the schedulers roll out.

#include "cli/formation_versions.h"

#include <cctype>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/output.h"
#include "cli/queries.h"

namespace pgfleet::cli {
namespace {

using nlohmann::json;

// A whole number word, all of it ("3x" is not 3); throws UsageError naming `what`.
int WholeNumber(const std::string& what, const std::string& word, int min) {
  int n = 0;
  size_t used = 0;
  try {
    n = std::stoi(word, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != word.size() || !std::isdigit(static_cast<unsigned char>(word[0])) ||
      n < min) {
    throw UsageError(what + " must be a whole number >= " + std::to_string(min) + " (got \"" +
                     word + "\")");
  }
  return n;
}

struct UpdateFlags {
  std::vector<std::string> pos, envs, constraints, ports;
  HealthFlags health;
  model::JobSpec job;
  int replicas = 0;
  std::string spread;
  RolloutFlags rollout;
  LimitFlags limits;
};

// The columns `formation update` changes: only those whose flags were given
// (and the command, when one follows --). Throws UsageError.
json UpdateChanges(const Command& cmd, UpdateFlags* flags,
                   const std::vector<std::string>& command) {
  model::JobSpec& s = flags->job;
  // Every rule of a job spec applies to the given values as to `run`'s.
  model::JobSpec checked = s;
  checked.command = command.empty() ? std::vector<std::string>{"placeholder"} : command;
  CompleteSpec(flags->envs, flags->constraints, flags->ports, flags->health, &checked);
  json c = RolloutChanges(cmd, flags->rollout);
  AddLimitChanges(cmd, flags->limits, &c);
  if (!command.empty()) c["command"] = command;
  if (cmd.Given("env")) c["env"] = checked.env;
  if (cmd.Given("constraint")) c["constraints"] = checked.constraints;
  if (cmd.Given("cpu")) c["cpu"] = s.cpu;
  if (cmd.Given("memory")) c["memory"] = s.memory;
  if (cmd.Given("priority")) c["priority"] = s.priority;
  if (cmd.Given("rootfs")) c["rootfs"] = s.rootfs;
  if (cmd.Given("user")) c["run_as"] = s.user;
  if (cmd.Given("network")) c["network"] = s.network;
  if (cmd.Given("pids-max")) c["pids_max"] = s.pids_max;
  if (cmd.Given("seccomp")) c["seccomp"] = s.seccomp;
  if (cmd.Given("disk")) c["disk"] = s.disk;
  if (s.cpu_hard_limit) c["cpu_hard_limit"] = true;
  if (cmd.Given("stop-grace")) c["stop_grace_seconds"] = s.stop_grace_seconds;
  if (checked.health_check) c["health_check"] = model::ToJson(*checked.health_check);
  if (cmd.Given("port")) c["ports"] = checked.ports;
  if (cmd.Given("file")) c["files"] = model::ToJson(checked.files);
  if (cmd.Given("replicas")) {
    if (flags->replicas < 0) {
      throw UsageError("--replicas must be >= 0 (got " + std::to_string(flags->replicas) + ")");
    }
    c["replicas"] = flags->replicas;
  }
  if (cmd.Given("spread")) c["spread"] = flags->spread.empty() ? json() : json(flags->spread);
  if (c.empty())
    throw UsageError("nothing to change: give the options to change, or -- CMD ARG...");
  return c;
}

int Update(const std::vector<std::string>& args, const std::vector<std::string>& command) {
  UpdateFlags flags;
  Command cmd("pgfleet formation update NAME [options] [-- CMD ARG...]", kText);
  cmd.Options()("replicas", po::value(&flags.replicas), "service: copies to keep running")(
      "spread", po::value(&flags.spread), "host, a host label key, or \"\" to pack");
  AddRolloutOptions(cmd, &flags.rollout);
  AddLimitOptions(cmd, &flags.limits);
  AddJobTemplateOptions(cmd, &flags.job, &flags.envs, &flags.constraints, &flags.ports, &flags.health);
  cmd.Positional("args", &flags.pos);
  if (!cmd.Parse(args)) return kExitOk;
  if (flags.pos.size() != 1)
    throw UsageError("expected: formation update NAME [options] [-- CMD ARG...]");
  json changes = UpdateChanges(cmd, &flags, command);
  auto conn = cmd.Connect();
  pqxx::work tx(*conn);
  int version = UpdateFormation(tx, flags.pos[0], changes);
  tx.commit();
  std::cout << flags.pos[0] << " updated: version " << version << "\n";
  return kExitOk;
}

// A subcommand of `n` words and no options ("history NAME"): its words, its
// --json, and a connection; nullopt when --help was printed. Throws
// UsageError for another count of words.
struct Words {
  std::vector<std::string> pos;
  bool json = false;
  std::unique_ptr<pqxx::connection> conn;
};
// `check` judges the words before anything connects.
std::optional<Words> ParseWords(
    const std::string& usage, Output output, const std::vector<std::string>& args, size_t n,
    const std::function<void(const std::vector<std::string>&)>& check = nullptr) {
  Words w;
  Command cmd("pgfleet formation " + usage, output);
  cmd.Positional("args", &w.pos);
  if (!cmd.Parse(args)) return std::nullopt;
  if (w.pos.size() != n) throw UsageError("expected: formation " + usage);
  if (check) check(w.pos);
  w.json = cmd.json();
  w.conn = cmd.Connect();
  return w;
}

int History(const std::vector<std::string>& args) {
  auto w = ParseWords("history NAME", kListing, args, 1);
  if (!w) return kExitOk;
  pqxx::work tx(*w->conn);
  json out = FormationHistory(tx, w->pos[0]);
  if (out.empty()) throw std::runtime_error("no formation named " + w->pos[0]);
  if (w->json) {
    PrintJson(out);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& v : out) {
    std::string what = v["note"].get<std::string>();
    if (what.empty()) what = "changed " + v["changed"].get<std::string>();
    table.push_back(
        {std::to_string(v["version"].get<int>()) + (v["current"].get<bool>() ? " *" : ""),
         v["created_at"].get<std::string>(), v["created_by"].get<std::string>(),
         v["was_healthy"].get<bool>() ? "yes" : "no", what});
  }
  PrintTable({"VERSION", "CREATED", "BY", "HEALTHY", "WHAT"}, table);
  return kExitOk;
}

int Revert(const std::vector<std::string>& args) {
  auto w = ParseWords("revert NAME VERSION", kText, args, 2,
                      [](const auto& pos) { WholeNumber("VERSION", pos[1], 1); });
  if (!w) return kExitOk;
  int version = WholeNumber("VERSION", w->pos[1], 1);
  pqxx::work tx(*w->conn);
  RevertFormation(tx, w->pos[0], version);
  tx.commit();
  std::cout << w->pos[0] << " reverting to version " << version << "\n";
  return kExitOk;
}

int Promote(const std::vector<std::string>& args) {
  auto w = ParseWords("promote NAME", kText, args, 1);
  if (!w) return kExitOk;
  pqxx::work tx(*w->conn);
  PromoteFormation(tx, w->pos[0]);
  tx.commit();
  std::cout << w->pos[0] << " promoted\n";
  return kExitOk;
}

std::string Text(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// A cron formation's schedule, next and last runs (formation_status), in
// lines; a due time skipped by its overlap rule says so.
std::string CronRuns(const json& s) {
  std::string out = "cron " + Text(s["cron"]) + " in " + Text(s["time_zone"]) + ", overlap " +
                    Text(s["overlap"]) + ", catch_up " + Text(s["catch_up"]) + "\n" +
                    "next run " + Text(s["next_due_at"]) + "\n";
  const json& last = s.value("last_run", json());
  if (last.is_null()) return out + "last run none yet\n";
  out += "last run " + Text(last["due_at"]) + ": job " + Text(last["job"]) + " " +
         Text(last["state"]) + "\n";
  if (Text(s["last_due_at"]) != Text(last["due_at"]))
    out += "last due " + Text(s["last_due_at"]) + ": no job (skipped, overlap skip)\n";
  return out;
}

int Status(const std::vector<std::string>& args) {
  auto w = ParseWords("status NAME", kListing, args, 1);
  if (!w) return kExitOk;
  pqxx::work tx(*w->conn);
  auto status = FormationStatus(tx, w->pos[0]);
  if (!status) throw std::runtime_error("no formation named " + w->pos[0]);
  json rollouts = Rollouts(tx, w->pos[0], 5);
  if (w->json) {
    PrintJson({{"formation", *status}, {"rollouts", rollouts}});
    return kExitOk;
  }
  const json& s = *status;
  std::cout << "formation " << Text(s["name"]) << " (" << Text(s["kind"]) << "), version "
            << Text(s.value("version", json())) << "\n"
            << "desired " << Text(s["desired"]) << ", pending " << Text(s["pending"])
            << ", running " << Text(s["running"]) << ", succeeded " << Text(s["succeeded"])
            << ", failed " << Text(s["failed"]) << "\n";
  if (Text(s["kind"]) == "cron") std::cout << CronRuns(s);
  if (rollouts.empty()) {
    std::cout << "no rollouts\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rollouts) {
    table.push_back({Text(r["rollout"]), Text(r["from_version"]) + " -> " + Text(r["version"]),
                     Text(r["state"]), Text(r["updated"]) + "/" + Text(r["desired"]),
                     Text(r["healthy"]), Text(r["unhealthy"]), Text(r["old"]), Text(r["canary"]),
                     Text(r["deadline"]), Text(r["message"])});
  }
  PrintTable({"ROLLOUT", "VERSION", "STATE", "UPDATED", "HEALTHY", "UNHEALTHY", "OLD", "CANARY",
              "DEADLINE", "MESSAGE"},
             table);
  return kExitOk;
}

}  // namespace

void AddRolloutOptions(Command& cmd, RolloutFlags* flags) {
  cmd.Options()("max-parallel", po::value(&flags->max_parallel),
                "rolling updates: replicas replaced at a time, N or P% (default 1)")(
      "min-healthy-time", po::value(&flags->min_healthy_time),
      "rolling updates: how long a new replica must be healthy first, e.g. 10s (default 10s)")(
      "canary", po::value(&flags->canary),
      "rolling updates: new replicas started beside the old until promoted (default 0)")(
      "progress-deadline", po::value(&flags->progress_deadline),
      "rolling updates: fail when no new replica is healthy for this long (default 5min)")(
      "auto-revert", po::value(&flags->auto_revert),
      "rolling updates: true rolls a failed rollout back to the last healthy version");
}

json RolloutChanges(const Command& cmd, const RolloutFlags& flags) {
  json c = json::object();
  if (cmd.Given("max-parallel")) c["max_parallel"] = flags.max_parallel;
  if (cmd.Given("min-healthy-time")) c["min_healthy_time"] = flags.min_healthy_time;
  if (cmd.Given("canary")) {
    if (flags.canary < 0) {
      throw UsageError("--canary must be >= 0 (got " + std::to_string(flags.canary) + ")");
    }
    c["canary"] = flags.canary;
  }
  if (cmd.Given("progress-deadline")) c["progress_deadline"] = flags.progress_deadline;
  if (cmd.Given("auto-revert")) {
    if (flags.auto_revert != "true" && flags.auto_revert != "false") {
      throw UsageError("--auto-revert must be true or false (got \"" + flags.auto_revert + "\")");
    }
    c["auto_revert"] = flags.auto_revert == "true";
  }
  return c;
}

void AddLimitOptions(Command& cmd, LimitFlags* flags) {
  cmd.Options()("max-running", po::value(&flags->max_running),
                "jobs assigned or running at once, 1-100000 or none")(
      "preemptible", po::value(&flags->preemptible),
      "true, false or default: whether a higher-priority job may stop the jobs it makes "
      "(default: false for service and system, true otherwise)")(
      "min-available", po::value(&flags->min_available),
      "disruption budget: preemption leaves at least this many running, 0-100000 (at most "
      "--replicas for a service) or none");
}

namespace {
// A whole number 0-100000 as a flag's value, or the rule it breaks.
int WholeNumber(const std::string& flag, const std::string& v, int lo, const std::string& rule) {
  const bool digits =
      !v.empty() && v.size() <= 6 && v.find_first_not_of("0123456789") == std::string::npos;
  const int n = digits ? std::stoi(v) : -1;
  if (n < lo || n > 100000) throw UsageError("--" + flag + " must be " + rule + " (got \"" + v + "\")");
  return n;
}
}  // namespace

void AddLimitChanges(const Command& cmd, const LimitFlags& flags, json* changes) {
  if (cmd.Given("preemptible")) {
    const std::string& v = flags.preemptible;
    if (v != "true" && v != "false" && v != "default") {
      throw UsageError("--preemptible must be true, false or default (got \"" + v + "\")");
    }
    (*changes)["preemptible"] = v == "default" ? json() : json(v == "true");
  }
  if (cmd.Given("min-available")) {
    (*changes)["min_available"] =
        flags.min_available == "none"
            ? json()
            : json(WholeNumber("min-available", flags.min_available, 0,
                               "a whole number from 0 to 100000 or none"));
  }
  if (!cmd.Given("max-running")) return;
  const std::string& v = flags.max_running;
  if (v == "none") {
    (*changes)["max_running"] = nullptr;
    return;
  }
  (*changes)["max_running"] =
      WholeNumber("max-running", v, 1, "a whole number from 1 to 100000 or none");
}

bool IsVersionSubcommand(const std::string& sub) {
  return sub == "update" || sub == "history" || sub == "revert" || sub == "promote" ||
         sub == "status";
}

int CmdFormationVersions(const std::string& sub, const std::vector<std::string>& args,
                         const std::vector<std::string>& command) {
  if (sub != "update" && !command.empty()) {
    throw UsageError("formation " + sub + " takes no command after --");
  }
  if (sub == "update") return Update(args, command);
  if (sub == "history") return History(args);
  if (sub == "revert") return Revert(args);
  if (sub == "promote") return Promote(args);
  return Status(args);
}

}  // namespace pgfleet::cli
