// pgfleet logs: a job's output, from the host that ran it, else the last
// 4 KiB the database keeps.

#include <iostream>

#include "cli/command.h"
#include "cli/host_logs.h"
#include "cli/queries.h"

namespace pgfleet::cli {

int CmdLogs(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  bool follow = false;
  int tail = -1, attempt = 0;
  Command cmd("pgfleet logs JOB [-f] [--tail N] [--attempt N]", kText);
  cmd.Options()("follow,f", po::bool_switch(&follow), "keep printing until the attempt ends")(
      "tail", po::value(&tail), "only the last N lines")("attempt", po::value(&attempt),
                                                         "attempt (default: the latest)");
  cmd.Positional("job", &pos);
  cmd.ReadsHostLogs();
  if (!cmd.Parse(args)) return kExitOk;
  if (pos.size() != 1) throw UsageError("expected exactly one JOB");
  if (cmd.Given("tail") && tail < 0)
    throw UsageError("--tail must be >= 0 (got " + std::to_string(tail) + ")");
  if (attempt < 0) throw UsageError("--attempt must be > 0 (got " + std::to_string(attempt) + ")");
  int64_t id = ParseJobId(pos[0]);
  auto conn = cmd.Connect();
  pqxx::work tx(*conn);
  auto job = GetJobProgress(tx, id);
  if (!job) {
    std::cerr << "pgfleet logs: job " << id << " does not exist\n";
    return kExitFailure;
  }
  int a = attempt > 0 ? attempt : job->attempt;
  if (a == 0) {
    std::cerr << "pgfleet logs: job " << id << " has not run yet (" << model::ToString(job->state)
              << ")\n";
    return kExitFailure;
  }
  if (a > job->attempt) {
    std::cerr << "pgfleet logs: job " << id << " has no attempt " << a << " (its attempts: 1"
              << (job->attempt > 1 ? "-" + std::to_string(job->attempt) : "") << ")\n";
    return kExitFailure;
  }
  if (a < job->attempt) {
    // An earlier attempt: its log is on the host that ran it, which the
    // events name; the database keeps the tail of the latest attempt only.
    auto ran = GetAttemptHost(tx, id, a);
    if (!ran) {
      std::cerr << "pgfleet logs: job " << id << " has no record of where attempt " << a
                << " ran (its events were pruned)\n";
      return kExitFailure;
    }
    if (ran->api_url.empty()) {
      std::cerr << "pgfleet logs: attempt " << a << " of job " << id << " ran on host "
                << ran->host_id << ", which is no longer registered: its log is gone with it\n";
      return kExitFailure;
    }
    job->host_id = ran->host_id;
    job->api_url = ran->api_url;
    job->output_tail.reset();  // the kept tail is the latest attempt's
  }
  tx.commit();
  LogAccess access{cmd.TokenOrEmpty(),
                   [&conn, id, a](std::string* why) { return LogTicket(*conn, id, a, why); }};
  LogStream stream = StreamHostLogs(job->api_url, access, id, a, follow, tail);
  if (stream.ended) return kExitOk;
  if (stream.bytes > 0) {
    // Never print what was printed again: say where the output stopped.
    std::cerr << "pgfleet logs: host " << job->host_id << " stopped answering after "
              << stream.bytes << " bytes of job " << id << "'s output\n";
    return kExitFailure;
  }
  if (!stream.refused.empty()) {
    std::cerr << "pgfleet logs: host " << job->host_id << ": " << stream.refused << "\n";
  }
  if (job->output_tail) {
    std::cerr << "pgfleet logs: "
              << (stream.refused.empty() ? "host " + job->host_id + " not reachable; "
                                         : std::string())
              << "showing the last 4 KiB kept in the database\n";
    std::cout << *job->output_tail;
    return kExitOk;
  }
  std::cerr << "pgfleet logs: no logs available for job " << id << " (host " << job->host_id
            << " not reachable)\n";
  return kExitFailure;
}

}  // namespace pgfleet::cli
