#include "hostd/supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/util/text.h"

namespace pgfleet::hostd {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Supervisor::Record {
  int64_t job_id = 0;
  int attempt = 0;
  model::JobSpec spec;
  std::string dir;
  std::string log_path;
  attempt::ProcessId shim;  // who to signal; set under mu_, once the shim answered
  pid_t pid = 0;            // the job's main process; set under mu_
  std::string state = "starting";
  Clock::time_point started = Clock::now();
  Clock::time_point finished_at{};
  std::optional<ExitStatus> exit;
  int pending_stop = 0;     // 1 stop, 2 kill: asked for while the shim was starting
  std::string kill_reason;  // why hostd itself killed it (self-fence): the report's error
  bool kill_sent = false;
  json outcome_report;    // the terminal report, as sent
  bool rejected = false;  // the database rejected a report of it (see Replay)
};

json JobInfo::ToJson() const {
  json j{{"job", job_id}, {"attempt", attempt}, {"pid", pid}, {"state", state}};
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

Supervisor::Supervisor(SupervisorOptions options, Sink sink)
    : options_(std::move(options)),
      sink_(std::move(sink)),
      launcher_(options_.shim_binary, options_.driver, options_.data_dir, options_.host_id,
                options_.job_nofile) {
  mkdir((options_.data_dir + "/jobs").c_str(), 0755);
}

Supervisor::~Supervisor() {
  // Jobs keep running when hostd goes away (their shims are independent); only
  // stopper threads are waited for, briefly. hostd's main exits the process
  // without running this, so watcher threads never outlive their object.
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return threads_ == 0; });
}

std::string Supervisor::AttemptDir(int64_t job_id, int attempt) const {
  return options_.data_dir + "/jobs/" + std::to_string(job_id) + "-" + std::to_string(attempt);
}

void Supervisor::FailRecord(const std::shared_ptr<Record>& rec, const std::string& error) {
  rec->state = "start_failed";
  rec->exit = ExitStatus{};
  rec->exit->error = error;
  rec->finished_at = Clock::now();
  // Recorded for a restarted hostd too (a first outcome the shim wrote wins).
  attempt::Outcome o;
  o.kind = "start_failed";
  o.status.error = error;
  std::string ignored;
  attempt::AppendRecord(rec->dir, attempt::ToJson(o), &ignored);
  rec->outcome_report = {
      {"job", rec->job_id}, {"attempt", rec->attempt}, {"kind", "start_failed"}, {"error", error}};
  sink_(rec->outcome_report);
}

Supervisor::StartResult Supervisor::Start(int64_t job_id, int attempt, const model::JobSpec& spec,
                                          std::string* error) {
  auto rec = std::make_shared<Record>();
  rec->job_id = job_id;
  rec->attempt = attempt;
  rec->spec = spec;
  rec->dir = AttemptDir(job_id, attempt);
  rec->log_path = rec->dir + "/" + attempt::kOutputFile;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (records_.count({job_id, attempt})) return StartResult::kAlready;
    if (mkdir(rec->dir.c_str(), 0755) != 0) {
      if (errno == EEXIST) return StartResult::kPreviousLife;
      *error = "cannot create " + rec->dir + ": " + std::strerror(errno);
      records_[{job_id, attempt}] = rec;
      FailRecord(rec, *error);
      return StartResult::kFailed;
    }
    records_[{job_id, attempt}] = rec;
    if (fenced_) {
      *error = "host is self-fenced (" + fence_reason_ + "): not starting new work";
      FailRecord(rec, *error);
      return StartResult::kFailed;
    }
  }
  // The job may write in its directory whatever user it runs as.
  chmod(rec->dir.c_str(), 0777);
  attempt::ProcessId shim;
  pid_t pid = 0;
  bool ok = SpawnShim(*rec, &shim, &pid, error);
  std::lock_guard<std::mutex> lock(mu_);
  if (!ok) {
    spdlog::warn("job={} attempt={} start failed: {}", job_id, attempt, *error);
    FailRecord(rec, *error);
    return StartResult::kFailed;
  }
  rec->shim = shim;
  rec->pid = pid;
  rec->state = "running";
  sink_({{"job", job_id}, {"attempt", attempt}, {"kind", "running"}, {"pid", rec->pid}});
  spdlog::info("job={} attempt={} started pid={} shim={} driver={}", job_id, attempt, rec->pid,
               rec->shim.pid, options_.driver);
  if (fenced_) {
    rec->kill_reason = fence_reason_;
    rec->pending_stop = 2;
  }
  std::thread([this, rec] { Watch(rec); }).detach();
  if (rec->pending_stop) StopRecord(rec, rec->spec.stop_grace_seconds, rec->pending_stop == 2);
  return StartResult::kStarted;
}

bool Supervisor::SpawnShim(const Record& rec, attempt::ProcessId* shim, pid_t* pid,
                           std::string* error) {
  attempt::ShimRequest req;
  req.job_id = rec.job_id;
  req.attempt = rec.attempt;
  req.host_id = options_.host_id;
  req.data_dir = options_.data_dir;
  req.driver = options_.driver;
  req.spec = rec.spec;
  req.fence_after_ms = fence_after_ms_.load();
  // Lock on the shim's behalf before it exists: it inherits this open file
  // description, so from here on the attempt never looks "shim gone" while
  // its shim is alive, even if hostd dies this instant.
  int lock_fd = attempt::OpenLock(rec.dir);
  if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    *error = "cannot lock " + rec.dir + ": " + std::strerror(errno);
    if (lock_fd >= 0) close(lock_fd);
    return false;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    close(lock_fd);
    return false;
  }
  int reply_fd = fds[0];
  ShimLauncher::Result launched =
      launcher_.Launch(rec.dir, attempt::ToJson(req).dump(), fds[1], lock_fd, error);
  close(fds[1]);
  close(lock_fd);  // the shim's copy keeps the lock
  if (!launched.maybe_started) {
    close(reply_fd);
    return false;
  }
  *shim = launched.shim;  // unknown (0) only if the launcher died: see below

  // "ok <pid>" or "fail <message>", then EOF.
  std::string reply;
  bool eof = false;
  auto deadline = Clock::now() + options_.start_timeout;
  while (!eof) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{reply_fd, POLLIN, 0};
    int r = poll(&pfd, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    char buf[4096];
    ssize_t n = read(reply_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = true;
    } else {
      reply.append(buf, static_cast<size_t>(n));
    }
  }
  close(reply_fd);
  if (shim->pid <= 0) {
    // The launcher died mid-request; if a shim got to run, it says who it is.
    if (auto started = attempt::ReadState(rec.dir).started) *shim = started->shim;
  }
  if (eof && reply.rfind("ok ", 0) == 0) {
    *pid = static_cast<pid_t>(std::atoi(reply.c_str() + 3));
    if (*pid > 0) return true;
  }
  if (!eof) {
    // A shim this slow may still start the job: have it kill the job as soon
    // as it has one (the signal waits in its mask).
    bool told = attempt::SignalProcess(*shim, attempt::kKillSignal);
    *error = "the job's shim did not report within " +
             std::to_string(options_.start_timeout.count() / 1000) + " s" +
             (told ? "; it was told to kill the job" : "");
    return false;
  }
  if (reply.rfind("fail ", 0) == 0) {
    *error = reply.substr(5);
  } else if (auto o = attempt::ReadState(rec.dir).outcome; o && o->kind == "start_failed") {
    *error = o->status.error;
  } else {
    *error = "the job's shim ended before starting the job; see " + options_.data_dir + "/" +
             attempt::kShimLogFile;
  }
  return false;
}

void Supervisor::Watch(std::shared_ptr<Record> rec) {
  // Adopted from a previous hostd while its shim was still starting the job:
  // learn the job's pid (and the shim's identity) before waiting on the lock.
  while (rec->pid == 0) {
    if (auto job = attempt::ReadState(rec->dir).started) {
      std::lock_guard<std::mutex> lock(mu_);
      rec->pid = job->job.pid;
      rec->shim = job->shim;
      rec->spec.stop_grace_seconds = job->stop_grace_seconds;
      rec->state = "running";
      sink_({{"job", rec->job_id},
             {"attempt", rec->attempt},
             {"kind", "running"},
             {"pid", rec->pid}});
      if (rec->pending_stop) StopRecord(rec, rec->spec.stop_grace_seconds, rec->pending_stop == 2);
      break;
    }
    if (!attempt::ShimAlive(rec->dir)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  attempt::WaitShimGone(rec->dir);
  Finish(rec);
}

void Supervisor::Finish(const std::shared_ptr<Record>& rec) {
  auto state = attempt::ReadState(rec->dir);
  auto outcome = state.outcome;
  if (!outcome) {
    // The shim died without recording an outcome (killed, crashed, machine
    // rebooted). The job must not run on unwatched: kill what is left of it.
    attempt::Outcome o;
    o.kind = "lost";
    o.status.error = "the job's shim ended without recording the job's exit";
    if (state.started && attempt::SignalProcess(state.started->job, SIGKILL)) {
      kill(-state.started->job.pid, SIGKILL);  // verified alive just now: its group is the job's
      o.status.error += "; the job was still running and was killed";
    }
    std::string err;
    if (!attempt::AppendRecord(rec->dir, attempt::ToJson(o), &err)) {
      spdlog::warn("job={} attempt={} {}", rec->job_id, rec->attempt, err);
    }
    outcome = o;
  }
  const ExitStatus& st = outcome->status;
  json report{{"job", rec->job_id}, {"attempt", rec->attempt}, {"kind", outcome->kind}};
  std::string error = st.error;
  if (outcome->kind == "exited") {
    std::lock_guard<std::mutex> lock(mu_);
    if (!rec->kill_reason.empty()) error = rec->kill_reason;
  }
  if (outcome->kind == "exited") {
    report["exit_code"] = st.exit_code >= 0 ? json(st.exit_code) : json(nullptr);
    report["signal"] = st.signal > 0 ? json(st.signal) : json(nullptr);
    report["oom_killed"] = st.oom_killed;
    report["peak_memory_bytes"] = st.peak_memory_bytes;
    report["cpu_seconds"] = st.cpu_seconds;
    report["output_tail"] = util::TailOfFile(rec->log_path, kOutputTailBytes);
  }
  report["error"] = error.empty() ? json(nullptr) : json(util::SanitizeUtf8(error));
  {
    std::lock_guard<std::mutex> lock(mu_);
    rec->exit = st;
    rec->exit->error = error;
    rec->state = outcome->kind;
    rec->finished_at = Clock::now();
    rec->outcome_report = report;
    sink_(std::move(report));
    Prune();
  }
  cv_.notify_all();
  if (outcome->kind == "exited") {
    spdlog::info("job={} attempt={} exited code={} signal={} oom={}{}", rec->job_id, rec->attempt,
                 st.exit_code, st.signal, st.oom_killed, error.empty() ? "" : " (" + error + ")");
  } else {
    spdlog::warn("job={} attempt={} {}: {}", rec->job_id, rec->attempt, outcome->kind, error);
  }
}

bool Supervisor::SignalShim(const Record& rec, int shim_signal) const {
  return attempt::SignalProcess(rec.shim, shim_signal);
}

void Supervisor::StopRecord(std::shared_ptr<Record> rec, int grace_seconds, bool immediate) {
  // Called with mu_ held.
  if (rec->state == "starting") {
    rec->pending_stop = std::max(rec->pending_stop, immediate ? 2 : 1);
    return;
  }
  if (rec->state != "running") return;
  rec->state = "stopping";
  ++threads_;
  std::thread([this, rec, grace_seconds, immediate] {
    if (!immediate) {
      std::unique_lock<std::mutex> lock(mu_);
      SignalShim(*rec, attempt::kStopSignal);
      cv_.wait_for(lock, std::chrono::seconds(grace_seconds),
                   [&] { return rec->exit.has_value(); });
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!rec->exit) SignalShim(*rec, attempt::kKillSignal);
    --threads_;
    cv_.notify_all();
  }).detach();
}

bool Supervisor::Stop(int64_t job_id, int attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Record> rec;
  for (auto& [key, r] : records_) {
    if (key.first == job_id && (attempt == 0 || key.second == attempt)) rec = r;
  }
  if (!rec) {
    if (attempt == 0) return false;
    // Not started here (the dispatch may still be on its way): make sure it never starts.
    std::string dir = AttemptDir(job_id, attempt);
    if (mkdir(dir.c_str(), 0755) != 0) return false;
    auto r = std::make_shared<Record>();
    r->job_id = job_id;
    r->attempt = attempt;
    r->dir = dir;
    records_[{job_id, attempt}] = r;
    FailRecord(r, "stopped before it started");
    return true;
  }
  spdlog::info("job={} attempt={} stopping (grace {}s)", job_id, rec->attempt,
               rec->spec.stop_grace_seconds);
  StopRecord(rec, rec->spec.stop_grace_seconds, false);
  return true;
}

void Supervisor::Kill(int64_t job_id, int attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find({job_id, attempt});
  if (it == records_.end()) return;
  auto& rec = it->second;
  if (rec->state == "running" || rec->state == "stopping" || rec->state == "starting") {
    spdlog::warn("job={} attempt={} superseded: killing it (pid={})", job_id, attempt, rec->pid);
    if (rec->state == "stopping") {
      SignalShim(*rec, attempt::kKillSignal);
    } else {
      StopRecord(rec, 0, true);
    }
  }
}

void Supervisor::Rejected(int64_t job_id, int attempt) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find({job_id, attempt});
    if (it != records_.end()) it->second->rejected = true;
  }
  Kill(job_id, attempt);
}

std::vector<json> Supervisor::Replay(int64_t job_id, int attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find({job_id, attempt});
  if (it == records_.end()) return {};
  auto& rec = it->second;
  if (!rec->exit || !rec->rejected || rec->outcome_report.is_null()) return {};
  rec->rejected = false;
  spdlog::warn(
      "job={} attempt={} is assigned here but already ran here (its reports were "
      "rejected): reporting its outcome again",
      job_id, attempt);
  std::vector<json> out;
  if (rec->pid > 0) {
    out.push_back({{"job", job_id}, {"attempt", attempt}, {"kind", "running"}, {"pid", rec->pid}});
  }
  out.push_back(rec->outcome_report);
  return out;
}

size_t Supervisor::Fence(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  fenced_ = true;
  fence_reason_ = reason;
  size_t n = 0;
  for (auto& [key, rec] : records_) {
    if (rec->exit || rec->kill_sent) continue;
    rec->kill_reason = reason;
    rec->kill_sent = true;
    if (rec->state == "starting") {
      rec->pending_stop = 2;  // Start() kills it once the shim has answered
    } else {
      SignalShim(*rec, attempt::kKillSignal);
    }
    ++n;
  }
  return n;
}

void Supervisor::Unfence() {
  std::lock_guard<std::mutex> lock(mu_);
  fenced_ = false;
  fence_reason_.clear();
}

void Supervisor::MarkReported(int64_t job_id, int attempt) {
  // A rename, not a new file: creating inodes is what per-job work costs most.
  std::string dir = AttemptDir(job_id, attempt);
  if (rename((dir + "/" + attempt::kStateFile).c_str(),
             (dir + "/" + attempt::kReportedStateFile).c_str()) != 0 &&
      errno != ENOENT) {
    spdlog::warn("job={} attempt={} cannot mark reported in {}: {}", job_id, attempt, dir,
                 std::strerror(errno));
  }
}

Supervisor::RecoverSummary Supervisor::Recover() {
  RecoverSummary summary;
  std::vector<std::shared_ptr<Record>> finished;
  DIR* d = opendir((options_.data_dir + "/jobs").c_str());
  if (!d) return summary;
  while (auto* e = readdir(d)) {
    long long job_id = 0;
    int attempt = 0, used = 0;
    std::string name = e->d_name;
    if (std::sscanf(name.c_str(), "%lld-%d%n", &job_id, &attempt, &used) != 2 ||
        used != static_cast<int>(name.size()) || job_id <= 0 || attempt <= 0) {
      continue;
    }
    std::string dir = AttemptDir(job_id, attempt);
    if (attempt::FileExists(dir + "/" + attempt::kReportedStateFile)) continue;  // settled
    auto rec = std::make_shared<Record>();
    rec->job_id = job_id;
    rec->attempt = attempt;
    rec->dir = dir;
    rec->log_path = dir + "/" + attempt::kOutputFile;
    auto state = attempt::ReadState(dir);
    const auto& job = state.started;
    if (job) {
      rec->pid = job->job.pid;
      rec->shim = job->shim;
      rec->spec.stop_grace_seconds = job->stop_grace_seconds;
    }
    if (attempt::ShimAlive(dir)) {
      rec->state = rec->pid > 0 ? "running" : "starting";  // Watch() learns the pid
      {
        std::lock_guard<std::mutex> lock(mu_);
        records_[{job_id, attempt}] = rec;
        // The previous hostd may have died before reporting it: running
        // reports are idempotent, so say it again.
        if (rec->pid > 0) {
          sink_({{"job", job_id}, {"attempt", attempt}, {"kind", "running"}, {"pid", rec->pid}});
        }
      }
      spdlog::info("job={} attempt={} re-attached to running job pid={} shim={}", job_id, attempt,
                   rec->pid, rec->shim.pid);
      ++summary.adopted;
      std::thread([this, rec] { Watch(rec); }).detach();
      continue;
    }
    // No shim, no outcome, no job: never started (hostd died before the
    // launch, or Stop() reserved it). The reconcile reports it if the database cares.
    if (!job && !state.outcome) continue;
    rec->state = "running";
    {
      std::lock_guard<std::mutex> lock(mu_);
      records_[{job_id, attempt}] = rec;
    }
    finished.push_back(rec);
  }
  closedir(d);
  for (auto& rec : finished) {
    auto outcome = attempt::ReadState(rec->dir).outcome;
    if (rec->pid > 0 && (!outcome || outcome->kind == "exited")) {
      std::lock_guard<std::mutex> lock(mu_);
      sink_({{"job", rec->job_id},
             {"attempt", rec->attempt},
             {"kind", "running"},
             {"pid", rec->pid}});
    }
    Finish(rec);
    std::lock_guard<std::mutex> lock(mu_);
    if (rec->state == "lost") {
      ++summary.lost;
    } else {
      ++summary.finished;
    }
  }
  return summary;
}

bool Supervisor::Known(int64_t job_id, int attempt) const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_.count({job_id, attempt}) > 0;
}

bool Supervisor::Live(int64_t job_id, int attempt) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find({job_id, attempt});
  return it != records_.end() && !it->second->exit;
}

std::vector<JobInfo> Supervisor::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobInfo> out;
  for (auto& [key, r] : records_) {
    out.push_back(
        JobInfo{r->job_id, r->attempt, r->pid, r->state, r->log_path, r->started, r->exit});
  }
  return out;
}

std::optional<JobInfo> Supervisor::Latest(int64_t job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<JobInfo> out;
  for (auto& [key, r] : records_) {
    if (key.first == job_id) {
      out = JobInfo{r->job_id, r->attempt, r->pid, r->state, r->log_path, r->started, r->exit};
    }
  }
  return out;
}

std::string Supervisor::LogPath(int64_t job_id, int attempt) const {
  if (attempt > 0) {
    std::string p = AttemptDir(job_id, attempt) + "/" + attempt::kOutputFile;
    struct stat st;
    return stat(p.c_str(), &st) == 0 ? p : "";
  }
  // Latest attempt on disk: also after a hostd restart, logs outlive the job.
  std::string prefix = std::to_string(job_id) + "-";
  int best = 0;
  if (DIR* d = opendir((options_.data_dir + "/jobs").c_str())) {
    while (auto* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.compare(0, prefix.size(), prefix) == 0) {
        try {
          best = std::max(best, std::stoi(n.substr(prefix.size())));
        } catch (const std::exception&) {
        }
      }
    }
    closedir(d);
  }
  return best > 0 ? LogPath(job_id, best) : "";
}

std::vector<std::pair<int64_t, int>> Supervisor::LiveStartedBefore(Clock::time_point t) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<int64_t, int>> out;
  for (auto& [key, r] : records_) {
    if (!r->exit && r->started < t) out.push_back(key);
  }
  return out;
}

size_t Supervisor::LiveCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& [key, r] : records_) n += r->exit ? 0 : 1;
  return n;
}

void Supervisor::Prune() {
  // Called with mu_ held: forget finished attempts after an hour (their
  // directories stay, so they can never start again and their logs remain).
  auto cutoff = Clock::now() - std::chrono::hours(1);
  for (auto it = records_.begin(); it != records_.end();) {
    if (it->second->exit && it->second->finished_at < cutoff) {
      it = records_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace pgfleet::hostd
