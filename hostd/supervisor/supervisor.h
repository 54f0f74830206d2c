#pragma once
// hostd's supervisor: the state machine of every attempt this host runs. It
// starts each (job, attempt) at most once through an attempt runner
// (attempt_runner.h), waits for the outcome, applies the stop policy (SIGTERM,
// grace, SIGKILL), and hands every state change to a report sink as a
// model::Report. Driver-agnostic.
//
// The runner is the shim runner (shim_runner.h: each attempt under its own
// shim process, which runs the job through the driver), or for driver "sim"
// the sim runner (hollow/sim.h: no process, nothing on disk).
//
// At most once: the runner claims (job, attempt) before the start; the shim
// runner's claim is the mkdir of <data_dir>/jobs/<job>-<attempt>, so neither a
// second dispatch nor a restarted hostd can start the same attempt again.
//
// Jobs outlive hostd: shims run in their own sessions and keep running (and
// recording) when hostd exits or is killed. Recover() (recovery.cpp) re-attaches
// a new hostd to what the previous one left (attempt_dir.h has the files and
// protocol, docs/failures-hostd.md the operator's view).
//
// Every public method is thread-safe (the API's threads, the agent's thread,
// the fence watchdog and the runner's threads call them). The sink is called
// with the supervisor's lock held, so it must not call back into the
// supervisor; Agent::Enqueue only queues.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/model/report.h"
#include "core/model/states.h"
#include "core/util/mutex.h"
#include "hostd/attempt/attempt_dir.h"
#include "hostd/attempt/attempt_runner.h"
#include "hostd/drivers/driver.h"

namespace pgfleet::hostd {

// The lost report for an attempt the database assigns here of which this
// host has no trace (its directory holds nothing to re-attach to:
// StartResult::kPreviousLife; or nothing of it at all), about the job of
// that uid only, as every report is.
inline model::Report NoTraceOfAttempt(int64_t job, int attempt, const std::string& uid) {
  auto r = model::Report::Lost(job, attempt,
                               "hostd restarted and found no shim or exit record for the attempt");
  r.uid = uid;
  return r;
}

struct JobInfo {
  int64_t job_id = 0;
  int attempt = 0;
  pid_t pid = 0;
  model::AttemptState state = model::AttemptState::kStarting;
  std::string log_path;
  std::chrono::steady_clock::time_point started;
  std::optional<ExitStatus> exit;
  nlohmann::json ToJson() const;  // the API's view (api.h)
};

// Why a spec cannot start here for want of privilege, or nullopt: a spec not
// marked privileged (jobs.privileged, sent in the dispatch) may use none of
// model::PrivilegeProblem's features, and a driver that does not isolate
// (process) runs none.
std::optional<std::string> RefusedAsUnprivileged(const model::JobSpec& spec,
                                                 const model::DriverCapabilities& driver);
// Why a spec's network cannot be given here, or nullopt: "bridge" needs a
// driver that isolates (container) and a working CNI network (options.bridge).
// Why a spec's ports cannot be given to its job, or nullopt: in a
// dispatched spec each is the host port the attempt was given (jobs.host_ports),
// never 0 (any free port is the scheduler's to pick, not the host's).
std::optional<std::string> RefusedPorts(const model::JobSpec& spec);
struct SupervisorOptions;
std::optional<std::string> RefusedNetwork(const model::JobSpec& spec,
                                          const model::DriverCapabilities& driver,
                                          const SupervisorOptions& options);

// A running attempt with a health check, as the health monitor
// (hostd/health/health_monitor.h) sees it.
struct HealthTarget {
  int64_t job_id = 0;
  int attempt = 0;
  std::string uid;  // the job's (jobs.uid); "" unknown
  pid_t pid = 0;    // the job's main process (0 for the sim driver)
  std::chrono::steady_clock::time_point started;
  model::HealthCheck check;
};

struct SupervisorOptions {
  std::string data_dir;  // absolute; attempts live in <data_dir>/jobs
  std::string host_id;
  // What each shim runs the job with ("process", "container"), or "sim"
  // (hollow/sim.h: no shim; data_dir, shim_binary and job_nofile unused).
  std::string driver = "process";
  // The pgfleet-hostd executable, started once as the shim launcher
  // (shim_launcher.h); hostd passes /proc/self/exe (itself, also after its
  // file was replaced by an upgrade).
  std::string shim_binary = "/proc/self/exe";
  // RLIMIT_NOFILE soft limit for shims and their jobs (hostd raises its own);
  // 0 = inherit hostd's.
  uint64_t job_nofile = 0;
  // How long Start() waits for the shim's answer ("ok <pid>" or "fail <message>").
  std::chrono::milliseconds start_timeout{20000};
  // How long a finished attempt stays in memory (List, Known, Replay). Its
  // claim stays (attempt_runner.h): it never starts again either way.
  std::chrono::milliseconds keep_finished = std::chrono::hours(1);
  // Output files per job, and MiB per file, when its spec sets none
  // (--log-max-files, --log-max-file-mb).
  int log_max_files = model::kDefaultLogMaxFiles;
  int log_max_file_mb = model::kDefaultLogMaxFileMb;
  // Where each job's shim forwards its output lines (--log-forward,
  // log_forward.h); "" = nowhere.
  std::string log_forward;
  // The container driver's user namespace ids (--job-ids, drivers/driver.h).
  JobIdRange job_ids;
  // The host part of hostd's advertised URL: the host of every job's
  // PGFLEET_ADDR_<NAME>.
  std::string host_address;
  // The CNI network of network "bridge" jobs (hostd/network/), when this
  // host offers it; else bridge_missing says why not (the start_failed error
  // of a bridge job dispatched here all the same).
  std::optional<network::NetworkOptions> bridge;
  std::string bridge_missing = "hostd has no working CNI configuration";
  // Whether an attempt's directory was collected (collector.h): such an
  // attempt is never started again, like one whose directory exists.
  // uid: the job's (jobs.uid); a collection recorded for another uid is
  // another job's and does not count.
  std::function<bool(int64_t job_id, int attempt, const std::string& uid)> collected;
};

class Supervisor {
 public:
  enum class StartResult {
    kStarted,       // started now
    kAlready,       // this hostd already started (or finished, or adopted) this attempt
    kFailed,        // the driver could not start it (start_failed reported)
    kPreviousLife,  // its directory exists but holds nothing to re-attach to; not restarted
    kFenced,        // the host is self-fenced: nothing claimed, nothing reported; try later
  };
  using Sink = std::function<void(model::Report report)>;

  // runner: how attempts run (hostd/attempt_runners.h makes the one for
  // options.driver; tests/component give a fake one).
  Supervisor(SupervisorOptions options, Sink sink, std::unique_ptr<AttemptRunner> runner);
  ~Supervisor();

  struct RecoverSummary {
    int adopted = 0;          // shim alive: watched again, "running" re-reported
    int finished = 0;         // ended while hostd was away: the recorded outcome is reported
    int lost = 0;             // shim gone without an outcome: job killed if left, reported lost
    int cgroups_removed = 0;  // job cgroups left by shims that are gone
  };
  // Re-attaches to the attempts a previous hostd left in the data dir; call
  // once, before Start(). Attempts whose outcome was already delivered
  // (MarkReported) are skipped. An adopted attempt's health check
  // (attempt::kHealthCheckFile) runs again, its grace counted from now.
  // Defined in recovery.cpp.
  RecoverSummary Recover();
  // Container driver: removes the cgroup of every attempt whose shim is gone
  // (killed before it could), then the per-host group if it is left empty.
  // Recover() calls it; hostd again at a clean exit. Returns how many job
  // cgroups were removed.
  int RemoveLeftoverCgroups();

  StartResult Start(int64_t job_id, int attempt, const model::JobSpec& spec, std::string* error);
  // Stops the attempt (0 = the job's latest attempt here): SIGTERM, the job's
  // grace period, then SIGKILL; with force (pgfleet.force_stop), SIGKILL now,
  // also during a grace already running. Returns immediately. False, creating
  // nothing, for an attempt this host does not have.
  bool Stop(int64_t job_id, int attempt, bool force = false);
  // The database says this attempt is ours and wanted stopped, and it never
  // started here: claim it so it never starts, and report it start_failed
  // ("stopped before it started"). For reconcile only, which reads the
  // database; the API's stop never creates anything. False if known already.
  bool StopBeforeStart(int64_t job_id, int attempt);
  // Fencing: the attempt was superseded; SIGKILL the whole job now.
  void Kill(int64_t job_id, int attempt);
  // The database rejected a report of this attempt, of the job with this uid
  // ("": unknown): Kill() it, and remember, for Replay(). Nothing when the
  // attempt here by that id and number is another job's now (a report of an
  // attempt ForgetOtherJob dropped, answered after the new one started).
  void Rejected(int64_t job_id, int attempt, const std::string& uid);
  // The reports of a finished attempt (running, then its outcome), once, for
  // when the database still or again shows it live here: its reports were
  // rejected and the database later assigned the attempt here after all, or
  // its end was delivered and the database lost it (a failover to a standby
  // that never got that commit, a restore). Empty otherwise.
  std::vector<model::Report> Replay(int64_t job_id, int attempt);
  // Self-fence: SIGKILLs every live attempt now (their exit reports carry
  // `reason` as the error) and refuses new starts until Unfence(). Returns
  // how many attempts were told to die by this call.
  size_t Fence(const std::string& reason);
  void Unfence();
  // Whether the host is self-fenced now, and why (the reason Fence was given).
  bool Fenced(std::string* reason) const;
  // What new shims are told: SIGKILL the job once the host's lease is this
  // old (lease.h); 0 = never. Jobs already running keep the value they got.
  void SetFenceAfter(std::chrono::milliseconds after) { fence_after_ms_ = after.count(); }
  // The attempt's outcome reached the database (accepted or not): a
  // restarted hostd need not report it again. Accepted: see Replay. As for
  // Rejected, nothing when the attempt here is another job's than `uid`'s.
  void MarkReported(int64_t job_id, int attempt, const std::string& uid, bool accepted);

  // Health checks (hostd/health/): the running attempts whose spec has a
  // health check, each with its check.
  std::vector<HealthTarget> HealthTargets() const;
  // Reports the attempt's new health (a model::Report of kind health) if it
  // is still live here and the job of that uid. False otherwise.
  bool ReportHealth(int64_t job_id, int attempt, const std::string& uid, model::Health health,
                    const std::string& output);
  // Stops a running attempt that failed its health checks as Stop() does
  // (SIGTERM, its grace, SIGKILL); its exit report's error is `reason`
  // ("health check failed 3 times: <output>"), so the restart's event
  // quotes it. False when it is not running here (or is another job's).
  bool StopUnhealthy(int64_t job_id, int attempt, const std::string& uid,
                     const std::string& reason);

  bool Known(int64_t job_id, int attempt) const;
  // The attempt's own address (network "bridge", as its shim reported it),
  // for its running report; "" when it has none or is not known here.
  std::string AddressOf(int64_t job_id, int attempt) const;
  // Called before (job, attempt) of the job with this uid is started, stopped
  // or judged: a record here of that id and number for another uid (another
  // or a restored database) is dropped, its job killed if it still runs, and
  // nothing of it is reported. The directory is set aside when the attempt
  // is claimed (AttemptRunner::ClaimAttempt). No-op for an empty uid.
  void ForgetOtherJob(int64_t job_id, int attempt, const std::string& uid);
  bool Live(int64_t job_id, int attempt) const;
  std::vector<JobInfo> List() const;
  std::optional<JobInfo> Latest(int64_t job_id) const;
  // The record of that attempt (0: the latest), while this hostd keeps it.
  std::optional<JobInfo> Attempt(int64_t job_id, int attempt) const;
  // "process", "container" or "sim".
  const std::string& driver() const { return options_.driver; }
  // What this host's driver can do (model/driver_kind.h).
  const model::DriverCapabilities& capabilities() const { return caps_; }
  // Log file of the attempt (0 = latest found on disk); empty if none.
  std::string LogPath(int64_t job_id, int attempt) const;
  // False for the sim driver: its jobs run no process and have no output.
  bool RunsProcesses() const { return runner_->RunsProcesses(); }
  // Live attempts started (or adopted) before t (for the reconcile's superseded check).
  std::vector<std::pair<int64_t, int>> LiveStartedBefore(
      std::chrono::steady_clock::time_point t) const;
  size_t LiveCount() const;
  // The live attempts (not ended), each as "job/attempt/uid": what
  // pgfleet.heartbeat digests of the database's view of this host.
  std::vector<std::string> LiveAttemptKeys() const;
  // The root filesystems (JobSpec::rootfs) of the attempts this hostd started
  // most recently, newest first, each once, at most kRecentRootfs: what the
  // agent reports as the host's warm set (pgfleet.report_rootfs_warm).
  std::vector<std::string> RecentRootfs() const;
  static constexpr size_t kRecentRootfs = 16;

 private:
  // The host id when attempts run in the container driver's cgroups, else "".
  std::string ContainerHost() const {
    return caps_.has_cgroup ? options_.host_id : "";
  }
  // One attempt. Fields other than the identity (job_id, attempt, dir,
  // log_path) are guarded by mu_ once the record is in records_.
  struct Record {
    int64_t job_id = 0;
    int attempt = 0;
    model::JobSpec spec;
    std::string dir;
    std::string log_path;
    AttemptRunner::Started handle;  // who to signal; set once the runner started it
    pid_t pid = 0;                  // the job's main process
    model::AttemptState state = model::AttemptState::kStarting;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point finished_at{};
    std::optional<ExitStatus> exit;
    int pending_stop = 0;  // 1 stop, 2 kill: asked for while the shim was starting
    // Why hostd itself killed it (self-fence): the report's error. Such an
    // attempt is reported lost, not exited: the host, not the job, failed.
    std::string kill_reason;
    // Why hostd stopped it (StopUnhealthy): its exit report's error.
    std::string stop_reason;
    bool kill_sent = false;
    bool force_stopped = false;  // a force stop was applied (logged and signalled once)
    std::optional<model::Report> outcome_report;  // the final report, as sent
    bool rejected = false;   // the database rejected a report of it (see Replay)
    bool delivered = false;  // the database accepted its final report (see Replay)
    bool ran = false;        // reported running by this hostd
    std::string uid;         // the job's uid (jobs.uid) it was started for; "" unknown
    bool stale = false;      // another job's (ForgetOtherJob): never reported
    JobInfo Info() const;
    // Whether the job of `other_uid` is another than this attempt's (both known).
    bool OfAnotherJobThan(const std::string& other_uid) const {
      return attempt::OtherJob(uid, other_uid);
    }
  };
  using Key = std::pair<int64_t, int>;
  std::shared_ptr<Record> NewRecord(int64_t job_id, int attempt) const;
  attempt::ShimRequest ShimRequestFor(const Record& rec) const;
  // The shim's "running": marks rec running, reports it, applies a pending stop.
  void Running(const std::shared_ptr<Record>& rec) REQUIRES(mu_);
  // The shim of an adopted attempt: learns its pid if need be, waits for the end.
  void Watch(std::shared_ptr<Record> rec);
  void Finish(const std::shared_ptr<Record>& rec, const attempt::Outcome& outcome);
  void Signal(const Record& rec, int shim_signal) REQUIRES(mu_) {
    runner_->Signal(rec.job_id, rec.attempt, rec.handle, shim_signal);
  }
  model::Report OutcomeReport(const Record& rec, const attempt::Outcome& outcome,
                              const std::string& error) const;
  void FailRecord(const std::shared_ptr<Record>& rec, const std::string& error) REQUIRES(mu_);
  // Sends a report of rec, with its uid, unless rec is stale.
  void Emit(const Record& rec, model::Report report) REQUIRES(mu_);
  // Ends an attempt that never started because the host is fenced: reported
  // lost (the host-loss rule, not the job's attempts). Nothing is recorded on
  // disk, so a restarted hostd also finds it lost.
  void LoseRecord(const std::shared_ptr<Record>& rec, const std::string& error) REQUIRES(mu_);
  void StopRecord(std::shared_ptr<Record> rec, int grace_seconds, bool immediate) REQUIRES(mu_);
  // Kill(): SIGKILLs the live attempt (nothing once it ended).
  void KillRecord(const std::shared_ptr<Record>& rec) REQUIRES(mu_);
  void Ended(const std::shared_ptr<Record>& rec) REQUIRES(mu_);  // rec->exit was just set
  void Prune() REQUIRES(mu_);
  // Recover()'s steps (recovery.cpp).
  void Adopt(const std::shared_ptr<Record>& rec);
  void SettleFinished(const std::shared_ptr<Record>& rec, RecoverSummary* summary);

  const SupervisorOptions options_;
  const model::DriverCapabilities caps_;
  const Sink sink_;
  std::atomic<int64_t> fence_after_ms_{0};
  mutable util::Mutex mu_;
  util::CondVar cv_;                      // signalled when an attempt ends
  std::map<Key, std::shared_ptr<Record>> records_ GUARDED_BY(mu_);
  std::deque<Key> finished_ GUARDED_BY(mu_);  // in the order they ended
  std::deque<std::string> recent_rootfs_ GUARDED_BY(mu_);  // RecentRootfs
  bool fenced_ GUARDED_BY(mu_) = false;
  std::string fence_reason_ GUARDED_BY(mu_);
  int threads_ GUARDED_BY(mu_) = 0;  // stopper threads running
  // Last, so it goes first: the sim runner's destructor waits for an end it
  // is delivering, which still uses the members above.
  const std::unique_ptr<AttemptRunner> runner_;
};

}  // namespace pgfleet::hostd
