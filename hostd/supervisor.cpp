#include "hostd/supervisor.h"

#include <dirent.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/util/text.h"

namespace pgfleet::hostd {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Supervisor::Record {
  int64_t job_id = 0;
  int attempt = 0;
  spec::JobSpec spec;
  std::string log_path;
  std::unique_ptr<Execution> exec;
  pid_t pid = 0;
  std::string state = "starting";
  Clock::time_point started = Clock::now();
  Clock::time_point finished_at{};
  std::optional<ExitStatus> exit;
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

Supervisor::Supervisor(Driver& driver, std::string data_dir, std::string host_id, Sink sink)
    : driver_(driver),
      data_dir_(std::move(data_dir)),
      host_id_(std::move(host_id)),
      sink_(std::move(sink)) {
  mkdir((data_dir_ + "/jobs").c_str(), 0755);
}

Supervisor::~Supervisor() {
  // Jobs keep running when hostd goes away; only our threads must be gone
  // before the members they use. Waiters block on their job, so detach them:
  // wait briefly for stoppers, then leave.
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return threads_ == 0; });
}

std::string Supervisor::AttemptDir(int64_t job_id, int attempt) const {
  return data_dir_ + "/jobs/" + std::to_string(job_id) + "-" + std::to_string(attempt);
}

Supervisor::StartResult Supervisor::Start(int64_t job_id, int attempt, const spec::JobSpec& spec,
                                          std::string* error) {
  auto rec = std::make_shared<Record>();
  rec->job_id = job_id;
  rec->attempt = attempt;
  rec->spec = spec;
  std::string dir = AttemptDir(job_id, attempt);
  rec->log_path = dir + "/output.log";
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (records_.count({job_id, attempt})) return StartResult::kAlready;
    if (mkdir(dir.c_str(), 0755) != 0) {
      if (errno == EEXIST) return StartResult::kPreviousLife;
      *error = "cannot create " + dir + ": " + std::strerror(errno);
      rec->state = "start_failed";
      rec->exit = ExitStatus{};
      rec->exit->error = *error;
      records_[{job_id, attempt}] = rec;
      sink_({{"job", job_id}, {"attempt", attempt}, {"kind", "start_failed"}, {"error", *error}});
      return StartResult::kFailed;
    }
    records_[{job_id, attempt}] = rec;
  }
  // The job may write in its directory whatever user it runs as.
  chmod(dir.c_str(), 0777);
  RunRequest req;
  req.job_id = job_id;
  req.attempt = attempt;
  req.spec = spec;
  req.job_dir = dir;
  req.log_path = rec->log_path;
  req.host_id = host_id_;
  std::unique_ptr<Execution> exec;
  try {
    exec = driver_.Start(req);
  } catch (const std::exception& e) {
    *error = e.what();
    std::lock_guard<std::mutex> lock(mu_);
    rec->state = "start_failed";
    rec->exit = ExitStatus{};
    rec->exit->error = *error;
    rec->finished_at = Clock::now();
    spdlog::warn("job={} attempt={} start failed: {}", job_id, attempt, *error);
    sink_({{"job", job_id}, {"attempt", attempt}, {"kind", "start_failed"}, {"error", *error}});
    return StartResult::kFailed;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    rec->pid = exec->pid();
    rec->exec = std::move(exec);
    if (rec->state == "starting") rec->state = "running";
    ++threads_;
    sink_({{"job", job_id}, {"attempt", attempt}, {"kind", "running"}, {"pid", rec->pid}});
  }
  spdlog::info("job={} attempt={} started pid={} driver={}", job_id, attempt, rec->pid,
               driver_.name());
  std::thread([this, rec] { WaitFor(rec); }).detach();
  return StartResult::kStarted;
}

void Supervisor::WaitFor(std::shared_ptr<Record> rec) {
  ExitStatus st = rec->exec->Wait();
  std::string tail = util::TailOfFile(rec->log_path, kOutputTailBytes);
  json report{{"job", rec->job_id},
              {"attempt", rec->attempt},
              {"kind", "exited"},
              {"exit_code", st.exit_code >= 0 ? json(st.exit_code) : json(nullptr)},
              {"signal", st.signal > 0 ? json(st.signal) : json(nullptr)},
              {"oom_killed", st.oom_killed},
              {"peak_memory_bytes", st.peak_memory_bytes},
              {"cpu_seconds", st.cpu_seconds},
              {"output_tail", tail},
              {"error", st.error.empty() ? json(nullptr) : json(util::SanitizeUtf8(st.error))}};
  {
    std::lock_guard<std::mutex> lock(mu_);
    rec->exit = st;
    rec->state = "exited";
    rec->finished_at = Clock::now();
    sink_(std::move(report));
    --threads_;
    Prune();
  }
  cv_.notify_all();
  spdlog::info("job={} attempt={} exited code={} signal={} oom={}", rec->job_id, rec->attempt,
               st.exit_code, st.signal, st.oom_killed);
}

void Supervisor::StopRecord(std::shared_ptr<Record> rec, int grace_seconds, bool immediate) {
  // Called with mu_ held.
  if (rec->state != "running") return;
  rec->state = "stopping";
  ++threads_;
  std::thread([this, rec, grace_seconds, immediate] {
    if (!immediate) {
      rec->exec->Signal(SIGTERM);
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(grace_seconds),
                   [&] { return rec->exit.has_value(); });
    }
    if (!rec->exit) rec->exec->Signal(SIGKILL);
    std::lock_guard<std::mutex> lock(mu_);
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
    r->state = "start_failed";
    r->exit = ExitStatus{};
    r->exit->error = "stopped before it started";
    r->finished_at = Clock::now();
    records_[{job_id, attempt}] = r;
    sink_({{"job", job_id},
           {"attempt", attempt},
           {"kind", "start_failed"},
           {"error", "stopped before it started"}});
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
  if (it->second->state == "running" || it->second->state == "stopping") {
    spdlog::warn("job={} attempt={} superseded: killing it", job_id, attempt);
    if (it->second->state == "stopping") {
      it->second->exec->Signal(SIGKILL);
    } else {
      StopRecord(it->second, 0, true);
    }
  }
}

bool Supervisor::Known(int64_t job_id, int attempt) const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_.count({job_id, attempt}) > 0;
}

bool Supervisor::Live(int64_t job_id, int attempt) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find({job_id, attempt});
  return it != records_.end() && !it->second->exit && it->second->state != "start_failed";
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
    std::string p = AttemptDir(job_id, attempt) + "/output.log";
    struct stat st;
    return stat(p.c_str(), &st) == 0 ? p : "";
  }
  // Latest attempt on disk: also after a hostd restart, logs outlive the job.
  std::string prefix = std::to_string(job_id) + "-";
  int best = 0;
  if (DIR* d = opendir((data_dir_ + "/jobs").c_str())) {
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
    if (!r->exit && r->state != "start_failed" && r->started < t) out.push_back(key);
  }
  return out;
}

size_t Supervisor::LiveCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& [key, r] : records_) n += (!r->exit && r->state != "start_failed") ? 1 : 0;
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
