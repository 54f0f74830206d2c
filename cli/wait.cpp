// pgfleet wait: blocks until jobs end, saying on stderr what happens to them
// meanwhile (why one is still pending, each attempt placed, failed and
// retried), and exits with the job's exit code (one job) or 1 if any of
// several did not succeed.
//
// It LISTENs on model::kJobChannel and registers its jobs with
// pgfleet.watch_jobs, so a host's report that changes one wakes it at once;
// changes made elsewhere (a host declared lost, a pending reason) are seen
// by a re-read once a second.

#include <chrono>
#include <iostream>
#include <map>

#include "cli/command.h"
#include "cli/queries.h"
#include "cli/waiting.h"
#include "core/model/constants.h"
#include "core/util/text.h"

namespace pgfleet::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Exit code when --timeout passes first (as timeout(1)).
constexpr int kExitTimedOut = 124;
// How often the jobs are read again without a notification.
constexpr std::chrono::seconds kRecheck{1};

class Wakeups : public pqxx::notification_receiver {
 public:
  explicit Wakeups(pqxx::connection_base& conn)
      : pqxx::notification_receiver(conn, model::kJobChannel) {}
  void operator()(const std::string&, int) override {}
};

}  // namespace

int CmdWait(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  std::string timeout_text;
  Command cmd("pgfleet wait JOB... [--timeout DURATION]", kText);
  cmd.Options()("timeout", po::value(&timeout_text),
                "give up after this long (e.g. 30s, 5m), exit 124; the jobs keep running");
  cmd.Positional("job", &pos);
  if (!cmd.Parse(args)) return kExitOk;
  if (pos.empty()) throw UsageError("expected at least one JOB");
  std::vector<int64_t> ids;
  for (const auto& p : pos) ids.push_back(ParseJobId(p));
  std::optional<Clock::time_point> deadline;
  if (cmd.Given("timeout")) {
    try {
      deadline = Clock::now() +
                 std::chrono::duration_cast<Clock::duration>(
                     std::chrono::duration<double>(util::ParseSeconds("--timeout", timeout_text)));
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }

  auto conn = cmd.Connect();
  Wakeups wakeups(*conn);  // LISTEN before reading: no change falls in between
  {
    pqxx::work tx(*conn);
    WatchJobs(tx, ids);
    tx.commit();
  }
  OnInterrupt("pgfleet wait: interrupted; the jobs keep running (`pgfleet stop JOB` stops one)");
  std::map<int64_t, std::string> said;  // the last line printed per job
  std::vector<WaitedJob> jobs;
  while (true) {
    {
      pqxx::work tx(*conn);
      jobs = GetWaitedJobs(tx, ids);
      tx.commit();
    }
    if (jobs.size() != ids.size()) {
      for (int64_t id : ids) {
        bool found = false;
        for (const auto& j : jobs) found |= j.id == id;
        if (!found) std::cerr << "pgfleet wait: job " << id << " does not exist\n";
      }
      return kExitFailure;
    }
    bool all_final = true;
    for (const auto& j : jobs) {
      all_final = all_final && model::IsFinal(j.state);
      std::string line = DescribeWaitedJob(j);
      if (said[j.id] != line) std::cerr << line << "\n";
      said[j.id] = line;
    }
    if (all_final) break;
    auto wait = std::chrono::duration_cast<std::chrono::microseconds>(kRecheck);
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::microseconds>(*deadline - Clock::now());
      if (left.count() <= 0) {
        std::cerr << "pgfleet wait: timed out; the jobs keep running\n";
        return kExitTimedOut;
      }
      wait = std::min(wait, left);
    }
    conn->await_notification(wait.count() / 1000000, wait.count() % 1000000);
  }
  {
    pqxx::work tx(*conn);
    UnwatchJobs(tx);
    tx.commit();
  }
  if (jobs.size() == 1) return ExitCodeOfFinished(jobs[0]);
  for (const auto& j : jobs) {
    if (j.state != model::JobState::kSucceeded) return kExitFailure;
  }
  return kExitOk;
}

}  // namespace pgfleet::cli
