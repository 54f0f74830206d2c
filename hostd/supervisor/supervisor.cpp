#include "hostd/supervisor/supervisor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "core/util/mutex.h"
#include "core/util/text.h"
#include "hostd/attempt/collector.h"
#include "hostd/attempt/outcome.h"

namespace pgfleet::hostd {

using Clock = std::chrono::steady_clock;
using model::AttemptState;
using nlohmann::json;

json JobInfo::ToJson() const {
  json j{{"job", job_id},
         {"attempt", attempt},
         {"pid", pid},
         {"state", std::string(model::ToString(state))}};
  if (exit) {
    j["exit_code"] = exit->exit_code;
    j["signal"] = exit->signal;
    j["oom_killed"] = exit->oom_killed;
    j["error"] = exit->error;
    j["peak_memory_bytes"] = exit->peak_memory_bytes;
    j["cpu_seconds"] = exit->cpu_seconds;
  }
  return j;
}

JobInfo Supervisor::Record::Info() const {
  return JobInfo{job_id, attempt, pid, state, log_path, started, exit};
}

namespace {

// Free space an attempt needs to start: its spec, its records and the first
// of its output (the output files may then fill the disk; the shim reports
// what it could not write).
constexpr int64_t kMinFreeBytesToStart = 1 << 20;

}  // namespace

Supervisor::Supervisor(SupervisorOptions options, Sink sink, std::unique_ptr<AttemptRunner> runner)
    : options_(std::move(options)),
      caps_(CapabilitiesOfDriver(options_.driver)),
      sink_(std::move(sink)),
      runner_(std::move(runner)) {}

Supervisor::~Supervisor() {
  // Jobs keep running when hostd goes away (their shims are independent); only
  // stopper threads are waited for, briefly. hostd's main exits the process
  // without running this, so watcher threads never outlive their object.
  util::MutexLock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(100), [this] {
    mu_.AssertHeld();
    return threads_ == 0;
  });
}

std::shared_ptr<Supervisor::Record> Supervisor::NewRecord(int64_t job_id, int attempt) const {
  auto rec = std::make_shared<Record>();
  rec->job_id = job_id;
  rec->attempt = attempt;
  if (runner_->RunsProcesses()) {  // the sim runner keeps nothing on disk
    rec->dir = attempt::DirOf(options_.data_dir, job_id, attempt);
    rec->log_path = rec->dir + "/" + attempt::kOutputFile;
  }
  return rec;
}

void Supervisor::Emit(const Record& rec, model::Report report) {
  if (rec.stale) return;  // another job's attempt: nothing of it reaches the database
  report.uid = rec.uid;
  sink_(std::move(report));
}

void Supervisor::ForgetOtherJob(int64_t job_id, int attempt, const std::string& uid) {
  if (uid.empty()) return;
  util::MutexLock lock(mu_);
  auto it = records_.find({job_id, attempt});
  if (it == records_.end() || !it->second->OfAnotherJobThan(uid)) return;
  auto rec = it->second;
  spdlog::warn(
      "job={} attempt={}: the attempt this host has by that id and number is another job's (uid "
      "{}; this one is {}): another or a restored database; killing what is left of it, "
      "reporting nothing of it",
      job_id, attempt, rec->uid, uid);
  rec->stale = true;
  if (model::IsLive(rec->state) && rec->handle.shim.pid > 0) Signal(*rec, attempt::kKillSignal);
  records_.erase(it);
}

void Supervisor::FailRecord(const std::shared_ptr<Record>& rec, const std::string& error) {
  rec->state = AttemptState::kStartFailed;
  rec->exit = ExitStatus{};
  rec->exit->error = error;
  Ended(rec);
  runner_->RecordStartFailed(rec->job_id, rec->attempt, error);
  rec->outcome_report = model::Report::StartFailed(rec->job_id, rec->attempt, error);
  Emit(*rec, *rec->outcome_report);
}

void Supervisor::LoseRecord(const std::shared_ptr<Record>& rec, const std::string& error) {
  rec->state = model::StateAfter(model::ExitOutcome::kLost);
  rec->exit = ExitStatus{};
  rec->exit->error = error;
  Ended(rec);
  rec->outcome_report = model::Report::Lost(rec->job_id, rec->attempt, error);
  Emit(*rec, *rec->outcome_report);
}

// Defence in depth behind the database's check at insert (docs/security.md):
// a spec the dispatch does not mark privileged may use no privileged
// feature, and the process driver, which isolates nothing, runs none.
std::optional<std::string> RefusedAsUnprivileged(const model::JobSpec& spec,
                                                 const model::DriverCapabilities& driver) {
  if (spec.privileged) return std::nullopt;
  if (!driver.isolates) {
    return "the process driver does not isolate jobs: it runs only privileged jobs (submitters "
           "in pgfleet_privileged); run the others on container-driver hosts";
  }
  if (auto problem = model::PrivilegeProblem(spec)) {
    return problem->second + " (the dispatch does not mark this job privileged)";
  }
  return std::nullopt;
}

std::optional<std::string> RefusedPorts(const model::JobSpec& spec) {
  for (const auto& [name, port] : spec.ports) {
    if (port < 1 || port > 65535) {
      return "ports." + name + " must be the host port the attempt was given, 1 to 65535 (got " +
             std::to_string(port) + " in the dispatched spec)";
    }
  }
  return std::nullopt;
}

std::optional<std::string> RefusedNetwork(const model::JobSpec& spec,
                                          const model::DriverCapabilities& driver,
                                          const SupervisorOptions& options) {
  if (spec.network != "bridge") return std::nullopt;
  if (!driver.isolates) {
    return "network \"bridge\" needs the container driver: this host runs the " + options.driver +
           " driver, which offers only networks host and none";
  }
  if (!options.bridge) {
    return "network \"bridge\" is not available on this host: " + options.bridge_missing;
  }
  return std::nullopt;
}

std::string Supervisor::AddressOf(int64_t job_id, int attempt) const {
  util::MutexLock lock(mu_);
  auto it = records_.find({job_id, attempt});
  return it == records_.end() ? std::string() : it->second->handle.address;
}

Supervisor::StartResult Supervisor::Start(int64_t job_id, int attempt, const model::JobSpec& spec,
                                          std::string* error) {
  auto rec = NewRecord(job_id, attempt);
  rec->spec = spec;
  rec->uid = spec.uid;
  // Decided before taking the lock: it matches regular expressions.
  auto refused = RefusedAsUnprivileged(spec, caps_);
  if (!refused) refused = RefusedNetwork(spec, caps_, options_);
  if (!refused) refused = RefusedPorts(spec);
  {
    util::MutexLock lock(mu_);
    if (records_.count({job_id, attempt})) return StartResult::kAlready;
    // Self-fenced: not started, and not claimed either, so nothing is
    // reported: the attempt stays assigned and the reconcile after the fence
    // lifts starts it. (Reported lost, each refusal counted as a host loss,
    // and a host whose heartbeat had just come back failed jobs "lost 3 times"
    // in the moment before its watchdog lifted the fence.)
    if (fenced_) {
      *error = "host is self-fenced (" + fence_reason_ + "): not starting new work yet";
      return StartResult::kFenced;
    }
    if (options_.collected && options_.collected(job_id, attempt, spec.uid)) {
      return StartResult::kPreviousLife;
    }
    auto claim = runner_->ClaimAttempt(job_id, attempt, spec.uid, error);
    if (claim != AttemptRunner::Claim::kClaimed) {
      if (claim == AttemptRunner::Claim::kTaken) return StartResult::kPreviousLife;
      records_[{job_id, attempt}] = rec;
      FailRecord(rec, *error);
      return StartResult::kFailed;
    }
    records_[{job_id, attempt}] = rec;
    // For a restarted hostd that re-attaches to it (Recover).
    if (spec.health_check && runner_->RunsProcesses() &&
        !attempt::WriteHealthCheck(rec->dir, *spec.health_check)) {
      spdlog::warn(
          "job={} attempt={} cannot record its health check in {}: a restarted hostd "
          "will not check it",
          job_id, attempt, rec->dir);
    }
    if (refused) {
      *error = *refused;
      spdlog::warn("job={} attempt={} refused: {}", job_id, attempt, *error);
      FailRecord(rec, *error);
      return StartResult::kFailed;
    }
    // A job started on a full disk may run while its shim cannot record its
    // exit: the attempt would end as lost, its outcome unknown. Not started.
    if (runner_->RunsProcesses()) {
      const int64_t free = Collector::FreeBytes(options_.data_dir);
      if (free >= 0 && free < kMinFreeBytesToStart) {
        *error = fmt::format(
            "No space left on device: the host's data directory {} has {} KiB free, and an "
            "attempt needs at least {} KiB to record its output and exit",
            options_.data_dir, free / 1024, kMinFreeBytesToStart / 1024);
        spdlog::warn("job={} attempt={} not started: {}", job_id, attempt, *error);
        FailRecord(rec, *error);
        return StartResult::kFailed;
      }
    }
  }
  AttemptRunner::Started started;
  bool ok = runner_->Start(ShimRequestFor(*rec), &started, error);
  util::MutexLock lock(mu_);
  if (!ok) {
    spdlog::warn("job={} attempt={} start failed: {}", job_id, attempt, *error);
    FailRecord(rec, *error);
    return StartResult::kFailed;
  }
  rec->handle = started;
  rec->pid = started.job_pid;
  if (!spec.rootfs.empty()) {
    // Newest first, each once (the schedulers' warm-host affinity).
    recent_rootfs_.erase(std::remove(recent_rootfs_.begin(), recent_rootfs_.end(), spec.rootfs),
                         recent_rootfs_.end());
    recent_rootfs_.push_front(spec.rootfs);
    if (recent_rootfs_.size() > kRecentRootfs) recent_rootfs_.pop_back();
  }
  spdlog::info("job={} attempt={} started pid={} shim={} driver={}", job_id, attempt, rec->pid,
               rec->handle.shim.pid, options_.driver);
  if (fenced_) {
    rec->kill_reason = fence_reason_;
    rec->pending_stop = 2;
  }
  runner_->Await(job_id, attempt, [this, rec](attempt::Outcome o) { Finish(rec, o); });
  Running(rec);
  return StartResult::kStarted;
}

attempt::ShimRequest Supervisor::ShimRequestFor(const Record& rec) const {
  attempt::ShimRequest req;
  req.job_id = rec.job_id;
  req.attempt = rec.attempt;
  req.host_id = options_.host_id;
  req.data_dir = options_.data_dir;
  req.driver = options_.driver;
  req.spec = rec.spec;
  req.fence_after_ms = fence_after_ms_.load();
  req.log_max_files = rec.spec.log_max_files > 0 ? rec.spec.log_max_files : options_.log_max_files;
  req.log_max_file_mb =
      rec.spec.log_max_file_mb > 0 ? rec.spec.log_max_file_mb : options_.log_max_file_mb;
  req.log_forward = options_.log_forward;
  req.job_ids = options_.job_ids;
  req.host_address = options_.host_address;
  if (rec.spec.network == "bridge") req.network = options_.bridge;
  return req;
}

void Supervisor::Running(const std::shared_ptr<Record>& rec) {
  rec->state = AttemptState::kRunning;
  rec->ran = true;
  Emit(*rec, model::Report::Running(rec->job_id, rec->attempt, rec->pid));
  if (rec->pending_stop) StopRecord(rec, rec->spec.stop_grace_seconds, rec->pending_stop == 2);
}

void Supervisor::Watch(std::shared_ptr<Record> rec) {
  // Adopted from a previous hostd while its shim was still starting the job:
  // learn the job's pid (and the shim's identity) before waiting on the lock.
  while (rec->pid == 0) {
    if (auto job = attempt::ReadState(rec->dir).started) {
      util::MutexLock lock(mu_);
      rec->pid = job->job.pid;
      rec->handle.shim = job->shim;
      rec->handle.address = job->address;
      rec->spec.stop_grace_seconds = job->stop_grace_seconds;
      Running(rec);
      break;
    }
    if (!attempt::ShimAlive(rec->dir)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  attempt::WaitShimGone(rec->dir);
  Finish(rec, FinalOutcome(rec->job_id, rec->attempt, rec->dir, ContainerHost()));
}

model::Report Supervisor::OutcomeReport(const Record& rec, const attempt::Outcome& outcome,
                                        const std::string& error) const {
  model::Report r;
  r.job = rec.job_id;
  r.attempt = rec.attempt;
  r.kind = model::ReportKindOf(outcome.kind);
  if (outcome.kind == model::ExitOutcome::kExited) {
    const ExitStatus& st = outcome.status;
    r.exit_code = st.exit_code;
    r.signal = st.signal;
    r.oom_killed = st.oom_killed;
    r.peak_memory_bytes = st.peak_memory_bytes;
    r.cpu_seconds = st.cpu_seconds;
    r.output_tail = runner_->OutputTail(rec.job_id, rec.attempt);
  }
  r.error = error.empty() ? std::string() : util::SanitizeUtf8(error);
  return r;
}

void Supervisor::Finish(const std::shared_ptr<Record>& rec, const attempt::Outcome& outcome) {
  const ExitStatus& st = outcome.status;
  const bool exited = outcome.kind == model::ExitOutcome::kExited;
  std::string error = st.error;
  bool fence_killed = false;
  if (exited) {
    util::MutexLock lock(mu_);
    fence_killed = !rec->kill_reason.empty();
    if (fence_killed) {
      error = rec->kill_reason;
    } else if (!rec->stop_reason.empty()) {
      error = rec->stop_reason;  // stopped by hostd for failing its health checks
    }
  }
  // Killed by the self-fence: lost with its host, whatever its exit status.
  model::Report report = fence_killed ? model::Report::Lost(rec->job_id, rec->attempt, error)
                                      : OutcomeReport(*rec, outcome, error);
  {
    util::MutexLock lock(mu_);
    rec->exit = st;
    rec->exit->error = error;
    rec->state = model::StateAfter(outcome.kind);
    Ended(rec);
    rec->outcome_report = report;
    Emit(*rec, std::move(report));
    Prune();
  }
  cv_.notify_all();
  if (exited) {
    spdlog::info("job={} attempt={} exited code={} signal={} oom={}{}", rec->job_id, rec->attempt,
                 st.exit_code, st.signal, st.oom_killed, error.empty() ? "" : " (" + error + ")");
  } else {
    spdlog::warn("job={} attempt={} {}: {}", rec->job_id, rec->attempt,
                 model::ToString(outcome.kind), error);
  }
}

void Supervisor::MarkReported(int64_t job_id, int attempt, const std::string& uid, bool accepted) {
  // Under the lock, so a start that sets the directory aside and claims it
  // for another job comes wholly before or after.
  util::MutexLock lock(mu_);
  auto it = records_.find({job_id, attempt});
  // An answer about the attempt ForgetOtherJob dropped: this one is another job's.
  if (it != records_.end() && it->second->OfAnotherJobThan(uid)) return;
  // No record: the directory on disk says whose attempt it is.
  runner_->MarkReported(job_id, attempt, it == records_.end() ? uid : std::string());
  if (it != records_.end() && it->second->exit) it->second->delivered = accepted;
}

void Supervisor::Ended(const std::shared_ptr<Record>& rec) {
  rec->finished_at = Clock::now();
  finished_.emplace_back(rec->job_id, rec->attempt);
}

void Supervisor::Prune() {
  // Forget finished attempts after keep_finished (their claims stay, so they
  // can never start again, and so do the shim runner's logs).
  auto cutoff = Clock::now() - options_.keep_finished;
  while (!finished_.empty()) {
    auto it = records_.find(finished_.front());
    if (it != records_.end() && it->second->exit) {
      if (it->second->finished_at >= cutoff) break;
      records_.erase(it);
    }
    finished_.pop_front();
  }
}

}  // namespace pgfleet::hostd
