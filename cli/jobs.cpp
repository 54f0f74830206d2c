// pgfleet run | ps | inspect | logs | stop | events

#include <chrono>
#include <iostream>
#include <optional>
#include <thread>

#include "cli/common.h"
#include "core/net/http.h"
#include "core/model/job_spec.h"

namespace pgfleet::cli {
namespace {

using nlohmann::json;

std::string Opt(const pqxx::field& f) { return f.is_null() ? "" : f.as<std::string>(); }

json RowToJson(const pqxx::row& r) { return json::parse(r[0].as<std::string>()); }

// Streams an attempt's output from its host until the attempt ends there.
// Returns false if the host could not be asked (no token, unreachable).
bool StreamLogs(const std::string& api_url, const std::string& token, int64_t job, int attempt,
                bool follow, int tail) {
  if (token.empty() || api_url.empty()) return false;
  try {
    auto client = net::MakeClient(api_url, token, 5);
    client->set_read_timeout(30, 0);
    std::string path =
        "/v1/jobs/" + std::to_string(job) + "/logs?attempt=" + std::to_string(attempt);
    if (follow) path += "&follow=1";
    if (tail >= 0) path += "&tail=" + std::to_string(tail);
    int status = 0;
    auto res = client->Get(
        path.c_str(),
        [&](const httplib::Response& r) {
          status = r.status;
          return r.status == 200;
        },
        [&](const char* data, size_t len) {
          std::cout.write(data, static_cast<std::streamsize>(len));
          std::cout.flush();
          return true;
        });
    return res && status == 200;
  } catch (const std::exception&) {
    return false;
  }
}

const char* kJobRowSql =
    "select j.state, j.attempt, coalesce(j.host_id, ''), coalesce(h.api_url, ''), j.exit_code, "
    "j.signal,"
    "       j.output_tail, j.error"
    "  from pgfleet.jobs j left join pgfleet.hosts h on h.id = j.host_id where j.id = $1";

}  // namespace

int CmdRun(const std::vector<std::string>& all_args) {
  // Everything after "--" is the command, never parsed as options.
  std::vector<std::string> args, command;
  bool after = false;
  for (const auto& a : all_args) {
    if (!after && a == "--") {
      after = true;
      continue;
    }
    (after ? command : args).push_back(a);
  }
  Common common;
  model::JobSpec s;
  std::vector<std::string> envs, constraints, positional;
  std::string idem, network;
  bool wait = false, cpu_hard = false;
  po::options_description opts("pgfleet run [options] -- CMD ARG...");
  opts.add_options()("formation", po::value(&s.formation), "formation (default: default)")(
      "cpu", po::value(&s.cpu), "CPU in millicores (default 100)")(
      "memory", po::value(&s.memory), "memory limit in MiB (default 64)")(
      "constraint", po::value(&constraints)->composing(),
      "host label KEY=VALUE required (repeatable)")("env", po::value(&envs)->composing(),
                                                    "environment KEY=VALUE (repeatable)")(
      "priority", po::value(&s.priority), "0-100 (default 50)")(
      "max-attempts", po::value(&s.max_attempts), "runs before giving up (default 1)")(
      "idempotency-key", po::value(&idem), "submitting twice with one key creates one job")(
      "rootfs", po::value(&s.rootfs), "container root filesystem (directory or name)")(
      "user", po::value(&s.user), "user to run as (container default: nobody)")(
      "network", po::value(&s.network), "host (default) or none")(
      "pids-max", po::value(&s.pids_max), "maximum processes (default 1024)")(
      "cpu-hard-limit", po::bool_switch(&cpu_hard), "cap CPU at --cpu, not just share it")(
      "stop-grace", po::value(&s.stop_grace_seconds),
      "seconds from SIGTERM to SIGKILL (default 10)")(
      "wait", po::bool_switch(&wait), "stream the output and exit with the job's exit code")(
      "command", po::value(&positional)->composing(), "");
  AddCommonOptions(opts, common, false);
  po::variables_map vm;
  ParseArgs(args, opts, vm, "command", -1);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return kExitOk;
  }
  if (command.empty())
    command = positional;
  else if (!positional.empty())
    throw UsageError("unexpected argument \"" + positional[0] + "\" before --");
  s.command = command;
  s.cpu_hard_limit = cpu_hard;
  try {
    for (const auto& e : envs) s.env.insert(model::ParseKeyValue("--env", e));
    for (const auto& c : constraints) s.constraints.insert(model::ParseKeyValue("--constraint", c));
    model::Validate(s);
  } catch (const model::SpecError& e) {
    throw UsageError(e.what());
  }

  auto conn = ConnectDb(common);
  pqxx::work tx(*conn);
  auto nullable = [](const std::string& v) { return v.empty() ? std::optional<std::string>() : v; };
  json cmd = s.command;
  int64_t id =
      tx.exec_params1(
            "select pgfleet.submit(array(select jsonb_array_elements_text($1::jsonb)), $2, $3, $4,"
            " $5::jsonb, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
            cmd.dump(), s.formation, s.cpu, s.memory, json(s.env).dump(),
            json(s.constraints).dump(), s.priority, s.max_attempts, nullable(idem),
            nullable(s.rootfs), nullable(s.user), s.network, s.pids_max, s.cpu_hard_limit,
            s.stop_grace_seconds)[0]
          .as<int64_t>();
  tx.commit();
  if (!wait) {
    std::cout << id << "\n";
    return kExitOk;
  }
  std::cerr << "job " << id << " submitted\n";
  std::string token = TokenOrEmpty(common);
  int streamed_attempt = 0;
  bool streamed_ok = false;
  while (true) {
    pqxx::work t(*conn);
    auto r = t.exec_params1(kJobRowSql, id);
    t.commit();
    std::string state = r[0].as<std::string>();
    int attempt = r[1].as<int>();
    bool final = state == "succeeded" || state == "failed" || state == "cancelled";
    if ((state == "running" || final) && attempt > streamed_attempt && !r[3].is_null()) {
      streamed_attempt = attempt;
      streamed_ok = StreamLogs(r[3].as<std::string>(), token, id, attempt, true, -1);
      continue;  // re-read the state after the attempt's output ended
    }
    if (final) {
      if (!streamed_ok && !r[6].is_null()) std::cout << r[6].as<std::string>();
      std::cout.flush();
      if (state == "succeeded") return kExitOk;
      if (!r[7].is_null())
        std::cerr << "job " << id << " " << state << ": " << r[7].as<std::string>() << "\n";
      if (!r[4].is_null() && r[4].as<int>() > 0) return r[4].as<int>();
      if (!r[5].is_null()) return 128 + r[5].as<int>();
      return kExitFailure;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int CmdPs(const std::vector<std::string>& args) {
  Common common;
  bool all = false;
  std::string formation;
  int limit = 100;
  po::options_description opts("pgfleet ps [--all] [--formation F] [--limit N]");
  opts.add_options()("all,a", po::bool_switch(&all), "include finished jobs")(
      "formation", po::value(&formation), "only this formation")(
      "limit", po::value(&limit), "at most N jobs, newest first (default 100)");
  AddCommonOptions(opts, common, true);
  po::variables_map vm;
  ParseArgs(args, opts, vm);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return kExitOk;
  }
  if (limit <= 0) throw UsageError("--limit must be > 0 (got " + std::to_string(limit) + ")");
  auto conn = ConnectDb(common);
  pqxx::work tx(*conn);
  auto rows = tx.exec_params(
      "select j.id, j.formation, j.state, j.attempt, coalesce(j.host_id, ''), j.cpu, j.memory,"
      "       to_char(j.created_at, 'YYYY-MM-DD HH24:MI:SS'), array_to_string(j.command, ' '),"
      "       coalesce(j.error, ''), to_jsonb(j)::text"
      "  from pgfleet.jobs j"
      " where ($1 or j.state in ('pending', 'assigned', 'running'))"
      "   and ($2 = '' or j.formation = $2)"
      " order by j.id desc limit $3",
      all, formation, limit);
  if (common.json) {
    json out = json::array();
    for (const auto& r : rows) out.push_back(json::parse(r[10].as<std::string>()));
    PrintJson(out);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    std::string cmd = r[8].as<std::string>();
    if (cmd.size() > 40) cmd = cmd.substr(0, 37) + "...";
    table.push_back({r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<std::string>(),
                     r[3].as<std::string>(), r[4].as<std::string>(), r[5].as<std::string>() + "m",
                     r[6].as<std::string>() + "Mi", r[7].as<std::string>(), cmd,
                     r[9].as<std::string>()});
  }
  PrintTable({"ID", "FORMATION", "STATE", "ATTEMPT", "HOST", "CPU", "MEMORY", "CREATED", "COMMAND",
              "REASON"},
             table);
  return kExitOk;
}

int CmdInspect(const std::vector<std::string>& args) {
  Common common;
  std::vector<std::string> pos;
  po::options_description opts("pgfleet inspect JOB");
  opts.add_options()("job", po::value(&pos)->composing(), "");
  AddCommonOptions(opts, common, true);
  po::variables_map vm;
  ParseArgs(args, opts, vm, "job", -1);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return kExitOk;
  }
  if (pos.size() != 1) throw UsageError("expected exactly one JOB");
  int64_t id = ParseJobId(pos[0]);
  auto conn = ConnectDb(common);
  pqxx::work tx(*conn);
  auto r = tx.exec_params("select to_jsonb(j)::text from pgfleet.jobs j where j.id = $1", id);
  if (r.empty()) {
    std::cerr << "pgfleet inspect: job " << id << " does not exist\n";
    return kExitFailure;
  }
  json job = RowToJson(r[0]);
  auto ev = tx.exec_params(
      "select coalesce(json_agg(e order by e.id), '[]')::text from pgfleet.job_events e where "
      "e.job_id = $1",
      id);
  job["events"] = json::parse(ev[0][0].as<std::string>());
  if (common.json) {
    PrintJson(job);
    return kExitOk;
  }
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
  return kExitOk;
}

int CmdLogs(const std::vector<std::string>& args) {
  Common common;
  std::vector<std::string> pos;
  bool follow = false;
  int tail = -1, attempt = 0;
  po::options_description opts("pgfleet logs JOB [-f] [--tail N] [--attempt N]");
  opts.add_options()("follow,f", po::bool_switch(&follow), "keep printing until the attempt ends")(
      "tail", po::value(&tail), "only the last N lines")("attempt", po::value(&attempt),
                                                         "attempt (default: the latest)")(
      "job", po::value(&pos)->composing(), "");
  AddCommonOptions(opts, common, false);
  po::variables_map vm;
  ParseArgs(args, opts, vm, "job", -1);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return kExitOk;
  }
  if (pos.size() != 1) throw UsageError("expected exactly one JOB");
  if (vm.count("tail") && tail < 0)
    throw UsageError("--tail must be >= 0 (got " + std::to_string(tail) + ")");
  if (attempt < 0) throw UsageError("--attempt must be > 0 (got " + std::to_string(attempt) + ")");
  int64_t id = ParseJobId(pos[0]);
  auto conn = ConnectDb(common);
  pqxx::work tx(*conn);
  auto r = tx.exec_params(kJobRowSql, id);
  tx.commit();
  if (r.empty()) {
    std::cerr << "pgfleet logs: job " << id << " does not exist\n";
    return kExitFailure;
  }
  int a = attempt > 0 ? attempt : r[0][1].as<int>();
  if (a == 0) {
    std::cerr << "pgfleet logs: job " << id << " has not run yet (" << r[0][0].as<std::string>()
              << ")\n";
    return kExitFailure;
  }
  if (StreamLogs(Opt(r[0][3]), TokenOrEmpty(common), id, a, follow, tail)) return kExitOk;
  if (!r[0][6].is_null()) {
    std::cerr << "pgfleet logs: host " << Opt(r[0][2]) << " not reachable (or no --token-file); "
              << "showing the last 4 KiB kept in the database\n";
    std::cout << r[0][6].as<std::string>();
    return kExitOk;
  }
  std::cerr << "pgfleet logs: no logs available for job " << id << " (host " << Opt(r[0][2])
            << " not reachable, or no --token-file / $PGFLEET_TOKEN_FILE)\n";
  return kExitFailure;
}

int CmdStop(const std::vector<std::string>& args) {
  Common common;
  std::vector<std::string> pos;
  po::options_description opts("pgfleet stop JOB...");
  opts.add_options()("job", po::value(&pos)->composing(), "");
  AddCommonOptions(opts, common, false);
  po::variables_map vm;
  ParseArgs(args, opts, vm, "job", -1);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return kExitOk;
  }
  if (pos.empty()) throw UsageError("expected at least one JOB");
  std::vector<int64_t> ids;
  for (const auto& p : pos) ids.push_back(ParseJobId(p));
  auto conn = ConnectDb(common);
  for (int64_t id : ids) {
    pqxx::work tx(*conn);
    std::string result = tx.exec_params1("select pgfleet.cancel($1)", id)[0].as<std::string>();
    tx.commit();
    std::cout << id << " " << result << "\n";
  }
  return kExitOk;
}

int CmdEvents(const std::vector<std::string>& args) {
  Common common;
  std::vector<std::string> pos;
  bool follow = false;
  int limit = 100;
  po::options_description opts("pgfleet events [JOB] [-f]");
  opts.add_options()("follow,f", po::bool_switch(&follow), "keep printing new events")(
      "limit", po::value(&limit), "how many past events (default 100)")(
      "job", po::value(&pos)->composing(), "");
  AddCommonOptions(opts, common, true);
  po::variables_map vm;
  ParseArgs(args, opts, vm, "job", -1);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return kExitOk;
  }
  if (pos.size() > 1) throw UsageError("expected at most one JOB");
  if (limit <= 0) throw UsageError("--limit must be > 0 (got " + std::to_string(limit) + ")");
  int64_t job = pos.empty() ? 0 : ParseJobId(pos[0]);
  auto conn = ConnectDb(common);
  int64_t last = 0;
  bool first = true;
  while (true) {
    pqxx::work tx(*conn);
    auto rows = tx.exec_params(
        "select * from (select e.id, to_char(e.at, 'YYYY-MM-DD HH24:MI:SS.MS'), e.job_id, "
        "e.attempt, e.kind,"
        "       coalesce(e.host_id, ''), coalesce(e.detail, ''), to_jsonb(e)::text"
        "  from pgfleet.job_events e where ($1 = 0 or e.job_id = $1) and e.id > $2"
        " order by e.id desc limit $3) x order by 1",
        job, last, first ? limit : 10000);
    tx.commit();
    if (common.json) {
      for (const auto& r : rows) std::cout << r[7].as<std::string>() << "\n";
    } else {
      std::vector<std::vector<std::string>> table;
      for (const auto& r : rows) {
        table.push_back({r[1].as<std::string>(), r[2].as<std::string>(), r[3].as<std::string>(),
                         r[4].as<std::string>(), r[5].as<std::string>(), r[6].as<std::string>()});
      }
      if (first || !table.empty()) {
        if (first)
          PrintTable({"AT", "JOB", "ATTEMPT", "KIND", "HOST", "DETAIL"}, table);
        else
          for (auto& t : table) {
            std::cout << t[0] << "  " << t[1] << "  " << t[2] << "  " << t[3] << "  " << t[4]
                      << "  " << t[5] << "\n";
          }
      }
    }
    std::cout.flush();
    if (!rows.empty()) last = rows[rows.size() - 1][0].as<int64_t>();
    first = false;
    if (!follow) return kExitOk;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace pgfleet::cli
