#pragma once
// How the supervisor (supervisor.h) runs an attempt: it decides *when* an
// attempt is claimed, started, signalled and finished; a runner knows *how*.
// Two runners exist:
//   - ShimRunner (shim_runner.h): the real one. Each attempt runs under its own
//     shim process, with its directory, state file and log on disk.
//   - SimRunner (hollow/sim.h): the "sim" driver. An attempt is a deadline on
//     one timer thread shared by the process; nothing on disk, no process.
//
// What must hold, for every runner:
//   - ClaimAttempt is the at-most-once gate: once it returned kClaimed for a
//     (job, attempt), it never does again for that pair (for as long as the
//     runner's memory lasts: the shim runner's claims are directories, so they
//     outlast hostd; the sim runner's live in memory).
//   - After a successful Start, Await's `ended` is called exactly once, on a
//     thread of the runner's, with no supervisor lock held. Await is called at
//     most once per started attempt.
//   - Signal never calls back into the supervisor: the supervisor calls it
//     with its lock held.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "hostd/attempt/attempt_dir.h"

namespace pgfleet::hostd {

// How much of an attempt's output its exit report carries (jobs.output_tail).
inline constexpr size_t kOutputTailBytes = 4096;

class AttemptRunner {
 public:
  enum class Claim {
    kClaimed,  // the attempt is ours to start now
    kTaken,    // claimed before (by this runner, or a previous hostd's)
    kFailed,   // could not claim; *error says why
  };
  struct Started {
    attempt::ProcessId shim;  // who to signal (unset for the sim runner)
    pid_t job_pid = 0;        // the job's main process; 0 when there is none (sim)
    std::string address;      // the job's own address (network "bridge"); "" none
  };
  using Ended = std::function<void(attempt::Outcome outcome)>;

  virtual ~AttemptRunner() = default;

  // uid: the job's uid ("" when unknown). A claim left by another job of the
  // same id and attempt (another uid: another or a restored database) is not
  // this attempt's: it is set aside and the attempt claimed afresh.
  virtual Claim ClaimAttempt(int64_t job_id, int attempt, const std::string& uid,
                             std::string* error) = 0;
  // Records, where a restarted hostd would look, that a claimed attempt never
  // started (best effort).
  virtual void RecordStartFailed(int64_t job_id, int attempt, const std::string& error) = 0;
  // Starts a claimed attempt as req says. True with *out, or false with *error.
  virtual bool Start(const attempt::ShimRequest& req, Started* out, std::string* error) = 0;
  // Calls `ended` once the started attempt has ended (see above).
  virtual void Await(int64_t job_id, int attempt, Ended ended) = 0;
  // Delivers attempt::kStopSignal (SIGTERM the job) or attempt::kKillSignal
  // (SIGKILL it) to a started attempt; nothing once it has ended.
  virtual void Signal(int64_t job_id, int attempt, const Started& started, int shim_signal) = 0;
  // The last bytes of the attempt's output, for its exit report.
  virtual std::string OutputTail(int64_t job_id, int attempt) const = 0;
  // The attempt's outcome reached the database: a restarted hostd skips it.
  // With a uid, only if the attempt on disk is that job's (or of no known uid).
  virtual void MarkReported(int64_t job_id, int attempt, const std::string& uid) = 0;
  // The attempt's log file (attempt 0: the job's latest one); "" when none.
  virtual std::string LogPath(int64_t job_id, int attempt) const = 0;
  // False when attempts run without a process (and so without output or logs).
  virtual bool RunsProcesses() const = 0;
};

}  // namespace pgfleet::hostd
