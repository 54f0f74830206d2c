// pgfleet run: submits one job; with --wait, streams its output and exits
// with its exit code.

#include <chrono>
#include <iostream>
#include <thread>

#include "cli/command.h"
#include "cli/host_logs.h"
#include "cli/queries.h"
#include "cli/start_flags.h"
#include "cli/waiting.h"
#include "core/model/job_spec.h"

namespace pgfleet::cli {
namespace {

// What `run` was asked for, from its flags.
struct RunRequest {
  model::JobSpec spec;
  std::string idempotency_key;
  bool wait = false;
  bool stop_on_interrupt = false;
  HealthFlags health;
  StartFlags start;  // --after, --at, --in, --preemptible
};

// Adds run's own flags, writing into *req and the repeatable KEY=VALUE lists.
void AddRunOptions(Command& cmd, RunRequest* req, std::vector<std::string>* envs,
                   std::vector<std::string>* constraints, std::vector<std::string>* ports) {
  model::JobSpec& s = req->spec;
  cmd.Options()("formation", po::value(&s.formation), "formation (default: default)");
  AddJobTemplateOptions(cmd, &s, envs, constraints, ports, &req->health);
  cmd.Options()("max-attempts", po::value(&s.max_attempts), "runs before giving up (default 1)")(
      "idempotency-key", po::value(&req->idempotency_key),
      "submitting twice with one key creates one job")(
      "wait", po::bool_switch(&req->wait), "stream the output and exit with the job's exit code")(
      "stop-on-interrupt", po::bool_switch(&req->stop_on_interrupt),
      "with --wait: Ctrl-C stops the job (by default it keeps running)");
  AddStartOptions(cmd, &req->start);
}

// Polls the job, streaming each attempt's output from its host, until the job
// is final; returns the exit code `run --wait` ends with. On stderr it says
// why the job waits while it is pending, and each failed attempt's retry.
int WaitForJob(pqxx::connection& conn, int64_t id, const std::string& token) {
  int streamed_attempt = 0;
  LogStream streamed;
  std::string said;
  while (true) {
    pqxx::work tx(conn);
    auto job = GetJobProgress(tx, id);
    auto waited = GetWaitedJobs(tx, {id});
    tx.commit();
    if (!job || waited.empty()) throw std::runtime_error("job " + std::to_string(id) + " vanished");
    if (waited[0].state == model::JobState::kPending) {
      std::string line = DescribeWaitedJob(waited[0]);
      if (line != said) std::cerr << line << "\n";
      said = line;
    }
    bool final = model::IsFinal(job->state);
    if ((job->state == model::JobState::kRunning || final) && job->attempt > streamed_attempt) {
      streamed_attempt = job->attempt;
      int attempt = job->attempt;
      LogAccess access{token, [&conn, id, attempt](std::string* why) {
                         return LogTicket(conn, id, attempt, why);
                       }};
      streamed = StreamHostLogs(job->api_url, access, id, attempt, true, -1);
      continue;  // re-read the state after the attempt's output ended
    }
    if (final) {
      // The stored tail only when nothing was streamed: output is printed once.
      if (streamed.bytes == 0 && !streamed.ended && job->output_tail) {
        std::cout << *job->output_tail;
      } else if (!streamed.ended) {
        std::cerr << "pgfleet run: the output stream broke off after " << streamed.bytes
                  << " bytes; `pgfleet logs " << id << "` shows the rest\n";
      }
      std::cout.flush();
      if (job->state == model::JobState::kSucceeded) return kExitOk;
      if (job->error) {
        std::cerr << "job " << id << " " << model::ToString(job->state) << ": " << *job->error
                  << "\n";
      }
      if (job->exit_code && *job->exit_code > 0) return *job->exit_code;
      if (job->signal) return 128 + *job->signal;
      return kExitFailure;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

int CmdRun(const std::vector<std::string>& all_args) {
  // Everything after "--" is the command, never parsed as options.
  auto [args, command] = SplitAtDoubleDash(all_args);
  RunRequest req;
  std::vector<std::string> envs, constraints, ports, positional;
  Command cmd("pgfleet run [options] -- CMD ARG...", kText);
  AddRunOptions(cmd, &req, &envs, &constraints, &ports);
  cmd.Positional("command", &positional);
  cmd.ReadsHostLogs();
  if (!cmd.Parse(args)) return kExitOk;
  if (command.empty()) {
    command = positional;
  } else if (!positional.empty()) {
    throw UsageError("unexpected argument \"" + positional[0] + "\" before --");
  }
  req.spec.command = command;
  CompleteSpec(envs, constraints, ports, req.health, &req.spec);

  auto conn = cmd.Connect();
  JobStart start = CheckStartFlags(req.start, *conn);
  pqxx::work tx(*conn);
  int64_t id = Submit(tx, req.spec, req.idempotency_key, start);
  tx.commit();
  if (!req.wait) {
    std::cout << id << "\n";
    return kExitOk;
  }
  std::cerr << "job " << id << " submitted\n";
  std::string sid = std::to_string(id);
  if (req.stop_on_interrupt) {
    std::vector<std::string> stop = {"pgfleet", "stop", sid};
    if (!cmd.DbFlag().empty()) stop.insert(stop.end(), {"--db", cmd.DbFlag()});
    OnInterrupt("pgfleet run: interrupted; stopping job " + sid, stop);
  } else {
    OnInterrupt("pgfleet run: interrupted; job " + sid + " keeps running (`pgfleet stop " + sid +
                "` stops it; `pgfleet wait " + sid + "` waits again)");
  }
  return WaitForJob(*conn, id, cmd.TokenOrEmpty());
}

}  // namespace pgfleet::cli
