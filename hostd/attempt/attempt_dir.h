#pragma once
// The on-disk contract between hostd and the shims that run its jobs: one
// directory per attempt, <data_dir>/jobs/<job>-<attempt>, created by hostd
// with mkdir (the at-most-once marker: a directory that exists is never
// started again). Everything a restarted hostd needs to re-attach is here:
//
//   the directory itself  flock(LOCK_EX) on it is held from just before
//               the shim is launched until the shim has recorded the job's
//               outcome (it then unlocks and exits) or died. hostd takes it
//               before the shim exists and hands it over (same open file
//               description), so a starting shim never looks dead; if hostd
//               dies before the launch, the kernel drops it with hostd's
//               descriptor. "Shim alive" (ShimAlive) == "lock held": immune to
//               pid reuse, and the kernel releases it however the shim dies.
//               What it does not say: that the job still runs (a shim may be
//               between the job's exit and its outcome record).
//   state.jsonl the attempt's records, one JSON object per line, each
//               appended with a single O_APPEND write (so a line is whole or,
//               if its writer died mid-write, ignored by readers):
//               {"kind":"started","pid","pid_start","shim_pid","shim_start",
//                "stop_grace_seconds","address"} by the shim before hostd hears "started"
//               (start time = field 22 of /proc/<pid>/stat, so a reused pid
//               is never signalled), then one outcome: {"kind":"exited",...}
//               by the shim when the job ended, {"kind":"start_failed",
//               "error"} when it could not start, or {"kind":"lost","error"}
//               by hostd when the shim died without one (after killing what
//               was left of the job). The first outcome line wins.
//   work/       the job's working directory (kWorkDir), the job's to write
//   .etc/       the container's /etc/hostname and /etc/hosts, bound in
//   network.json  network "bridge": what DEL needs, until it succeeded
//               (hostd/network/attachment.h)
//   output.log  the job's stdout and stderr, through a pipe the shim copies
//               to this file, rotated to output.log.<offset> (output_log.h)
//   state.reported.jsonl  state.jsonl renamed by hostd once the outcome
//               reached the database: restarts skip the directory (one stat)
// and, per data dir:
//   shim.log    the shims' own log lines (appended; "job=N attempt=M ...")
//
// Why one appended file rather than a file per record written to a temporary
// name and renamed: creating an inode is the dominant per-job cost of the
// whole start on ext4 (measured ~150 us of CPU each here, more than a fork),
// and an append of one line is just as all-or-nothing for the reader.
//
// Stop protocol (hostd -> shim, signals to the verified shim pid):
//   SIGTERM -> the shim calls Execution::Signal(SIGTERM): the job's process
//              group (process driver) or cgroup (container driver)
//   SIGUSR1 -> Execution::Signal(SIGKILL): the whole job, at once
// The shim ignores SIGINT, SIGHUP, SIGQUIT and SIGPIPE; nothing hostd does or
// suffers (exit, kill -9, closed pipes) ends a shim.

#include <sys/types.h>

#include <csignal>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/model/job_spec.h"
#include "core/model/states.h"
#include "hostd/drivers/driver.h"

namespace pgfleet::hostd::attempt {

inline constexpr const char* kStateFile = "state.jsonl";
inline constexpr const char* kReportedStateFile = "state.reported.jsonl";
inline constexpr const char* kOutputFile = "output.log";
inline constexpr const char* kShimLogFile = "shim.log";  // in the data dir
// The job's working directory, <attempt dir>/work: the only part of the
// attempt the job can write. The attempt directory itself is root's, mode
// 0700: nothing the job does can plant a file or a link at a name hostd or
// the shim uses, and no other account of the host can reach into it.
inline constexpr const char* kWorkDir = "work";
// The job's uid (jobs.uid), written when the attempt is claimed: the same job
// id and attempt from another or a restored database is another attempt.
inline constexpr const char* kUidFile = "uid";
// The attempt's health check (jobs.health_check, hostd/health/), written
// by hostd when it starts the attempt, so that a restarted hostd that
// re-attaches to it checks it too. Absent: no check.
inline constexpr const char* kHealthCheckFile = "health_check.json";
// Where attempt directories of other jobs (by uid) are set aside:
// <data_dir>/stale/<job>-<attempt>-<uid>.
inline constexpr const char* kStaleDir = "stale";

inline constexpr int kStopSignal = SIGTERM;  // shim: SIGTERM the job
inline constexpr int kKillSignal = SIGUSR1;  // shim: SIGKILL the job

// <data_dir>/jobs, and the directory of one attempt in it.
std::string JobsDir(const std::string& data_dir);
std::string DirOf(const std::string& data_dir, int64_t job_id, int attempt);
// The uid an attempt directory was claimed for ("" when none was given, or
// the directory predates uids).
std::string ReadUid(const std::string& dir);
// Writes kHealthCheckFile (best effort: false when it cannot); reads it back,
// nullopt when absent or malformed (never throws).
bool WriteHealthCheck(const std::string& dir, const model::HealthCheck& check);
std::optional<model::HealthCheck> ReadHealthCheck(const std::string& dir);
// Whether two job uids name different jobs: both known ("" is unknown) and
// unequal. An attempt of unknown uid is taken to be the job's asking.
inline bool OtherJob(const std::string& uid, const std::string& other) {
  return !uid.empty() && !other.empty() && uid != other;
}

// Descriptors a shim runs with: 3 = write end of the start pipe (the shim
// writes "ok <job pid>" or "fail <message>" and closes it), 4 = the attempt
// directory, already locked, 5 = the request (ShimRequest JSON; a memfd).
inline constexpr int kStartPipeFd = 3;
inline constexpr int kLockFd = 4;
inline constexpr int kRequestFd = 5;

// What hostd asks a shim to run.
struct ShimRequest {
  int64_t job_id = 0;
  int attempt = 0;
  std::string host_id;
  std::string data_dir;  // hostd's --data-dir (the container driver resolves rootfs names in it)
  std::string driver;    // "process" or "container"
  model::JobSpec spec;
  // Self-fence: the shim SIGKILLs the job once the host's lease (lease.h) is
  // this old; 0 = never.
  int64_t fence_after_ms = 0;
  // The job's output files (output_log.h): the spec's limits, else the host's.
  int log_max_files = 5;
  int log_max_file_mb = 20;
  // hostd --log-forward (log_forward.h): "" (off), "journald", "syslog://HOST:PORT".
  std::string log_forward;
  // hostd --job-ids: the container driver's user namespace ids.
  JobIdRange job_ids;
  // The host part of hostd's advertised URL (PGFLEET_ADDR_<NAME>).
  std::string host_address;
  // Network "bridge": the CNI network hostd checked (network/attachment.h).
  std::optional<network::NetworkOptions> network;
};
nlohmann::json ToJson(const ShimRequest& r);
// Throws std::exception (model::SpecError for a bad spec) when malformed.
ShimRequest ShimRequestFromJson(const nlohmann::json& j);

// A process identity that survives pid reuse: pid plus its start time.
struct ProcessId {
  pid_t pid = 0;
  int64_t start_time = -1;  // clock ticks since boot; -1 unknown
};

// Start time of pid from /proc/<pid>/stat, or -1 when there is no such process.
int64_t ProcStartTime(pid_t pid);

// Sends sig to id.pid only if that pid still names the same process (start
// time matches), through a pidfd so the check and the signal cannot race.
// False when the process is gone (or was never known).
bool SignalProcess(const ProcessId& id, int sig);

bool FileExists(const std::string& path);

// "<pid> <start time>" (the launcher's reply).
std::string FormatProcessId(const ProcessId& id);

// The "started" record.
struct JobRecord {
  ProcessId job;
  ProcessId shim;
  int stop_grace_seconds = model::kDefaultStopGraceSeconds;
  std::string address;  // the job's own address (network "bridge"); "" none
};
nlohmann::json ToJson(const JobRecord& r);

// An outcome record.
struct Outcome {
  model::ExitOutcome kind = model::ExitOutcome::kExited;
  ExitStatus status;  // for kExited; status.error carries the message of the others
};
nlohmann::json ToJson(const Outcome& o);

// Appends one record to dir's state.jsonl (one write, O_APPEND). False with *error.
bool AppendRecord(const std::string& dir, const nlohmann::json& record, std::string* error);

struct State {
  std::optional<JobRecord> started;
  std::optional<Outcome> outcome;
};
// Reads state.jsonl (or, once reported, state.reported.jsonl); whole lines
// only, the first record of each sort wins.
State ReadState(const std::string& dir);

// Opens the attempt directory for locking (close-on-exec); -1 on failure.
int OpenLock(const std::string& dir);
// True when a shim holds dir's lock (tests without waiting).
bool ShimAlive(const std::string& dir);
// Blocks until the shim holding dir's lock has ended (at once if none does).
// False if the directory cannot be opened.
bool WaitShimGone(const std::string& dir);

}  // namespace pgfleet::hostd::attempt
