#include "hostd/supervisor.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/util/text.h"
#include "hostd/recovery.h"

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

Supervisor::Supervisor(SupervisorOptions options, Sink sink)
    : options_(std::move(options)),
      sink_(std::move(sink)),
      shims_({options_.shim_binary, options_.driver, options_.data_dir, options_.host_id,
              options_.job_nofile, options_.start_timeout}) {
  mkdir(attempt::JobsDir(options_.data_dir).c_str(), 0755);
}

Supervisor::~Supervisor() {
  // Jobs keep running when hostd goes away (their shims are independent); only
  // stopper threads are waited for, briefly. hostd's main exits the process
  // without running this, so watcher threads never outlive their object.
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return threads_ == 0; });
}

std::shared_ptr<Supervisor::Record> Supervisor::NewRecord(int64_t job_id, int attempt) const {
  auto rec = std::make_shared<Record>();
  rec->job_id = job_id;
  rec->attempt = attempt;
  rec->dir = attempt::DirOf(options_.data_dir, job_id, attempt);
  rec->log_path = rec->dir + "/" + attempt::kOutputFile;
  return rec;
}

void Supervisor::FailRecord(const std::shared_ptr<Record>& rec, const std::string& error) {
  rec->state = AttemptState::kStartFailed;
  rec->exit = ExitStatus{};
  rec->exit->error = error;
  rec->finished_at = Clock::now();
  // Recorded for a restarted hostd too (a first outcome the shim wrote wins).
  attempt::Outcome o;
  o.kind = model::ExitOutcome::kStartFailed;
  o.status.error = error;
  std::string ignored;
  attempt::AppendRecord(rec->dir, attempt::ToJson(o), &ignored);
  rec->outcome_report = model::Report::StartFailed(rec->job_id, rec->attempt, error);
  sink_(*rec->outcome_report);
}

Supervisor::StartResult Supervisor::Start(int64_t job_id, int attempt, const model::JobSpec& spec,
                                          std::string* error) {
  auto rec = NewRecord(job_id, attempt);
  rec->spec = spec;
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
  ShimClient::Started started;
  bool ok = shims_.Start(rec->dir, ShimRequestFor(*rec), &started, error);
  std::lock_guard<std::mutex> lock(mu_);
  if (!ok) {
    spdlog::warn("job={} attempt={} start failed: {}", job_id, attempt, *error);
    FailRecord(rec, *error);
    return StartResult::kFailed;
  }
  rec->shim = started.shim;
  rec->pid = started.job_pid;
  spdlog::info("job={} attempt={} started pid={} shim={} driver={}", job_id, attempt, rec->pid,
               rec->shim.pid, options_.driver);
  if (fenced_) {
    rec->kill_reason = fence_reason_;
    rec->pending_stop = 2;
  }
  std::thread([this, rec] { Watch(rec); }).detach();
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
  return req;
}

void Supervisor::Running(const std::shared_ptr<Record>& rec) {
  rec->state = AttemptState::kRunning;
  sink_(model::Report::Running(rec->job_id, rec->attempt, rec->pid));
  if (rec->pending_stop) StopRecord(rec, rec->spec.stop_grace_seconds, rec->pending_stop == 2);
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
      Running(rec);
      break;
    }
    if (!attempt::ShimAlive(rec->dir)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  attempt::WaitShimGone(rec->dir);
  Finish(rec);
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
    r.output_tail = util::TailOfFile(rec.log_path, kOutputTailBytes);
  }
  r.error = error.empty() ? std::string() : util::SanitizeUtf8(error);
  return r;
}

void Supervisor::Finish(const std::shared_ptr<Record>& rec) {
  auto outcome = FinalOutcome(rec->job_id, rec->attempt, rec->dir);
  const ExitStatus& st = outcome.status;
  const bool exited = outcome.kind == model::ExitOutcome::kExited;
  std::string error = st.error;
  if (exited) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!rec->kill_reason.empty()) error = rec->kill_reason;
  }
  model::Report report = OutcomeReport(*rec, outcome, error);
  {
    std::lock_guard<std::mutex> lock(mu_);
    rec->exit = st;
    rec->exit->error = error;
    rec->state = model::StateAfter(outcome.kind);
    rec->finished_at = Clock::now();
    rec->outcome_report = report;
    sink_(std::move(report));
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

void Supervisor::StopRecord(std::shared_ptr<Record> rec, int grace_seconds, bool immediate) {
  if (rec->state == AttemptState::kStarting) {
    rec->pending_stop = std::max(rec->pending_stop, immediate ? 2 : 1);
    return;
  }
  if (rec->state != AttemptState::kRunning) return;
  rec->state = AttemptState::kStopping;
  ++threads_;
  std::thread([this, rec, grace_seconds, immediate] {
    if (!immediate) {
      std::unique_lock<std::mutex> lock(mu_);
      ShimClient::Signal(rec->shim, attempt::kStopSignal);
      cv_.wait_for(lock, std::chrono::seconds(grace_seconds),
                   [&] { return rec->exit.has_value(); });
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!rec->exit) ShimClient::Signal(rec->shim, attempt::kKillSignal);
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
    auto r = NewRecord(job_id, attempt);
    if (mkdir(r->dir.c_str(), 0755) != 0) return false;
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
  if (!model::IsLive(rec->state)) return;
  spdlog::warn("job={} attempt={} superseded: killing it (pid={})", job_id, attempt, rec->pid);
  if (rec->state == AttemptState::kStopping) {
    ShimClient::Signal(rec->shim, attempt::kKillSignal);
  } else {
    StopRecord(rec, 0, true);
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

std::vector<model::Report> Supervisor::Replay(int64_t job_id, int attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find({job_id, attempt});
  if (it == records_.end()) return {};
  auto& rec = it->second;
  if (!rec->exit || !rec->rejected || !rec->outcome_report) return {};
  rec->rejected = false;
  spdlog::warn(
      "job={} attempt={} is assigned here but already ran here (its reports were "
      "rejected): reporting its outcome again",
      job_id, attempt);
  std::vector<model::Report> out;
  if (rec->pid > 0) out.push_back(model::Report::Running(job_id, attempt, rec->pid));
  out.push_back(*rec->outcome_report);
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
    if (rec->state == AttemptState::kStarting) {
      rec->pending_stop = 2;  // Running() kills it once the shim has answered
    } else {
      ShimClient::Signal(rec->shim, attempt::kKillSignal);
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
  std::string error;
  if (!MarkSettled(attempt::DirOf(options_.data_dir, job_id, attempt), &error)) {
    spdlog::warn("job={} attempt={} cannot mark reported: {}", job_id, attempt, error);
  }
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
  for (auto& [key, r] : records_) out.push_back(r->Info());
  return out;
}

std::optional<JobInfo> Supervisor::Latest(int64_t job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<JobInfo> out;
  for (auto& [key, r] : records_) {
    if (key.first == job_id) out = r->Info();
  }
  return out;
}

std::string Supervisor::LogPath(int64_t job_id, int attempt) const {
  // Latest attempt on disk: also after a hostd restart, logs outlive the job.
  if (attempt <= 0) attempt = LatestAttemptOnDisk(options_.data_dir, job_id);
  if (attempt <= 0) return "";
  std::string p = attempt::DirOf(options_.data_dir, job_id, attempt) + "/" + attempt::kOutputFile;
  return attempt::FileExists(p) ? p : "";
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
  // Forget finished attempts after an hour (their directories stay, so they
  // can never start again and their logs remain).
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
