// pgfleet migrate | hosts | status | drain | host | formation

#include <iostream>
#include <optional>

#include "cli/common.h"
#include "core/db/migrate.h"
#include "core/model/job_spec.h"
#include "core/util/text.h"

namespace pgfleet::cli {
namespace {

using nlohmann::json;

bool Help(const po::variables_map& vm, const po::options_description& opts) {
  if (!vm.count("help")) return false;
  std::cout << opts << "\n";
  return true;
}

}  // namespace

int CmdMigrate(const std::vector<std::string>& args) {
  Common common;
  po::options_description opts("pgfleet migrate");
  AddCommonOptions(opts, common, false);
  po::variables_map vm;
  ParseArgs(args, opts, vm);
  if (Help(vm, opts)) return kExitOk;
  auto conn = ConnectDb(common);
  auto applied = db::Migrate(*conn);
  if (applied.empty()) {
    std::cout << "schema up to date; functions and views re-created\n";
  } else {
    for (const auto& a : applied) std::cout << "applied " << a << "\n";
  }
  return kExitOk;
}

int CmdHosts(const std::vector<std::string>& args) {
  Common common;
  po::options_description opts("pgfleet hosts");
  AddCommonOptions(opts, common, true);
  po::variables_map vm;
  ParseArgs(args, opts, vm);
  if (Help(vm, opts)) return kExitOk;
  auto conn = ConnectDb(common);
  pqxx::work tx(*conn);
  auto rows = tx.exec(
      "select id, state, alive, coalesce(heartbeat_age_s::text, '-'), coalesce(suspended, false),"
      "       cpu_free || '/' || cpu || 'm', memory_free || '/' || memory || 'Mi', running_jobs, "
      "labels::text,"
      "       driver, coalesce(driver_note, ''), api_url, to_jsonb(h)::text"
      "  from pgfleet.host_status h order by id");
  if (common.json) {
    json out = json::array();
    for (const auto& r : rows) out.push_back(json::parse(r[12].as<std::string>()));
    PrintJson(out);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    std::string state = r[1].as<std::string>();
    if (state == "up" && !r[2].as<bool>()) state = "up (heartbeat late)";
    if (r[4].as<bool>()) state += " (suspended)";
    table.push_back({r[0].as<std::string>(), state, r[3].as<std::string>() + "s",
                     r[5].as<std::string>(), r[6].as<std::string>(), r[7].as<std::string>(),
                     r[8].as<std::string>(), r[9].as<std::string>(), r[11].as<std::string>(),
                     r[10].as<std::string>()});
  }
  PrintTable({"ID", "STATE", "HEARTBEAT", "CPU FREE", "MEMORY FREE", "RUNNING", "LABELS", "DRIVER",
              "API", "DRIVER NOTE"},
             table);
  return kExitOk;
}

int CmdStatus(const std::vector<std::string>& args) {
  Common common;
  po::options_description opts("pgfleet status");
  AddCommonOptions(opts, common, true);
  po::variables_map vm;
  ParseArgs(args, opts, vm);
  if (Help(vm, opts)) return kExitOk;
  auto conn = ConnectDb(common);
  pqxx::work tx(*conn);
  auto s = tx.exec1("select to_jsonb(c)::text from pgfleet.cluster_summary c");
  auto f = tx.exec("select to_jsonb(f)::text from pgfleet.formation_status f order by f.name");
  json summary = json::parse(s[0].as<std::string>());
  json formations = json::array();
  for (const auto& r : f) formations.push_back(json::parse(r[0].as<std::string>()));
  if (common.json) {
    PrintJson({{"cluster", summary}, {"formations", formations}});
    return kExitOk;
  }
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
  std::vector<std::vector<std::string>> table;
  for (auto& x : formations) {
    table.push_back({x["name"].get<std::string>(), x["kind"].get<std::string>(),
                     x["desired"].is_null() ? "-" : x["desired"].dump(), x["pending"].dump(),
                     x["assigned"].dump(), x["running"].dump(), x["succeeded"].dump(),
                     x["failed"].dump(), x["cancelled"].dump()});
  }
  PrintTable({"FORMATION", "KIND", "DESIRED", "PENDING", "ASSIGNED", "RUNNING", "SUCCEEDED",
              "FAILED", "CANCELLED"},
             table);
  return kExitOk;
}

static int SetHostState(const std::vector<std::string>& args, const std::string& fixed_state) {
  Common common;
  std::vector<std::string> pos;
  std::string deadline;
  po::options_description opts(fixed_state == "draining" ? "pgfleet drain HOST [--deadline 10m]"
                                                         : "pgfleet host offline|online HOST");
  opts.add_options()("args", po::value(&pos)->composing(), "");
  if (fixed_state == "draining") {
    opts.add_options()(
        "deadline", po::value(&deadline),
        "stop and requeue elsewhere the batch jobs still running after this long (90s, 10m, 2h)");
  }
  AddCommonOptions(opts, common, false);
  po::variables_map vm;
  ParseArgs(args, opts, vm, "args", -1);
  if (Help(vm, opts)) return kExitOk;
  std::string state = fixed_state, host;
  if (state.empty()) {
    if (pos.size() != 2 || (pos[0] != "offline" && pos[0] != "online")) {
      throw UsageError("expected: host offline HOST | host online HOST");
    }
    state = pos[0] == "offline" ? "offline" : "up";
    host = pos[1];
  } else {
    if (pos.size() != 1) throw UsageError("expected exactly one HOST");
    host = pos[0];
  }
  std::optional<double> deadline_seconds;
  if (!deadline.empty()) {
    try {
      deadline_seconds =
          static_cast<double>(util::ParseDuration("--deadline", deadline, true).count());
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  auto conn = ConnectDb(common);
  pqxx::work tx(*conn);
  if (state == "draining") {
    tx.exec_params("select pgfleet.drain($1, make_interval(secs => $2::float8))", host,
                   deadline_seconds);
  } else {
    tx.exec_params("select pgfleet.set_host_state($1, $2)", host, state);
  }
  tx.commit();
  std::cout << host << " " << state << (deadline.empty() ? "" : " (deadline in " + deadline + ")")
            << "\n";
  return kExitOk;
}

int CmdDrain(const std::vector<std::string>& args) { return SetHostState(args, "draining"); }
int CmdHost(const std::vector<std::string>& args) { return SetHostState(args, ""); }

int CmdFormation(const std::vector<std::string>& all_args) {
  if (all_args.empty() ||
      (all_args[0] != "create" && all_args[0] != "scale" && all_args[0] != "list")) {
    throw UsageError(
        "expected: formation create NAME [--kind K] [--replicas N] [...] -- CMD... | "
        "formation scale NAME N | formation list");
  }
  std::string sub = all_args[0];
  std::vector<std::string> args, command;
  bool after = false;
  for (size_t i = 1; i < all_args.size(); ++i) {
    if (!after && all_args[i] == "--") {
      after = true;
      continue;
    }
    (after ? command : args).push_back(all_args[i]);
  }
  Common common;
  std::vector<std::string> pos, envs, constraints;
  std::string kind = "batch";
  int replicas = 0;
  model::JobSpec s;
  s.command = {"placeholder"};
  po::options_description opts("pgfleet formation " + sub);
  opts.add_options()("kind", po::value(&kind), "service or batch (default batch)")(
      "replicas", po::value(&replicas), "service: copies to keep running")(
      "cpu", po::value(&s.cpu), "per replica, millicores")("memory", po::value(&s.memory),
                                                           "per replica, MiB")(
      "priority", po::value(&s.priority), "0-100")("env", po::value(&envs)->composing(),
                                                   "KEY=VALUE (repeatable)")(
      "constraint", po::value(&constraints)->composing(), "KEY=VALUE (repeatable)")(
      "args", po::value(&pos)->composing(), "");
  AddCommonOptions(opts, common, sub == "list");
  po::variables_map vm;
  ParseArgs(args, opts, vm, "args", -1);
  if (Help(vm, opts)) return kExitOk;
  auto conn = ConnectDb(common);
  pqxx::work tx(*conn);
  if (sub == "list") {
    auto rows = tx.exec("select to_jsonb(f)::text from pgfleet.formation_status f order by f.name");
    json out = json::array();
    for (const auto& r : rows) out.push_back(json::parse(r[0].as<std::string>()));
    if (common.json) {
      PrintJson(out);
      return kExitOk;
    }
    std::vector<std::vector<std::string>> table;
    for (auto& x : out) {
      table.push_back({x["name"].get<std::string>(), x["kind"].get<std::string>(),
                       x["desired"].is_null() ? "-" : x["desired"].dump(), x["pending"].dump(),
                       x["running"].dump(), x["succeeded"].dump(), x["failed"].dump()});
    }
    PrintTable({"NAME", "KIND", "DESIRED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED"}, table);
    return kExitOk;
  }
  if (sub == "scale") {
    if (pos.size() != 2) throw UsageError("expected: formation scale NAME N");
    int n;
    try {
      n = std::stoi(pos[1]);
    } catch (const std::exception&) {
      throw UsageError("replicas must be an integer (got \"" + pos[1] + "\")");
    }
    if (n < 0) throw UsageError("replicas must be >= 0 (got " + pos[1] + ")");
    tx.exec_params("select pgfleet.scale($1, $2)", pos[0], n);
    tx.commit();
    std::cout << pos[0] << " scaled to " << n << "\n";
    return kExitOk;
  }
  if (pos.size() != 1) throw UsageError("expected: formation create NAME [options] -- CMD ARG...");
  if (kind != "service" && kind != "batch")
    throw UsageError("--kind must be service or batch (got \"" + kind + "\")");
  if (replicas < 0)
    throw UsageError("--replicas must be >= 0 (got " + std::to_string(replicas) + ")");
  if (kind == "service" && command.empty())
    throw UsageError("a service formation needs a command after --");
  if (!command.empty()) s.command = command;
  try {
    for (const auto& e : envs) s.env.insert(model::ParseKeyValue("--env", e));
    for (const auto& c : constraints) s.constraints.insert(model::ParseKeyValue("--constraint", c));
    model::Validate(s);
  } catch (const model::SpecError& e) {
    throw UsageError(e.what());
  }
  json cmd = command;
  auto id = tx.exec_params1(
                  "insert into pgfleet.formations (name, kind, replicas, command, env, cpu, "
                  "memory, constraints, priority)"
                  " values ($1, $2, $3, case when $4 = '[]' then null else array(select "
                  "jsonb_array_elements_text($4::jsonb)) end,"
                  "         $5::jsonb, $6, $7, $8::jsonb, $9) returning id",
                  pos[0], kind, replicas, cmd.dump(), json(s.env).dump(), s.cpu, s.memory,
                  json(s.constraints).dump(), s.priority)[0]
                .as<int>();
  tx.commit();
  std::cout << pos[0] << " created (id " << id << ")\n";
  return kExitOk;
}

}  // namespace pgfleet::cli
