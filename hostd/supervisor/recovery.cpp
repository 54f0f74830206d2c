#include "hostd/supervisor/recovery.h"

#include <dirent.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "hostd/drivers/container/container.h"
#include "hostd/supervisor/supervisor.h"

namespace pgfleet::hostd {
void ForEachAttemptDir(const std::string& data_dir,
                       const std::function<void(int64_t job_id, int attempt)>& fn) {
  DIR* d = opendir(attempt::JobsDir(data_dir).c_str());
  if (!d) return;
  while (auto* e = readdir(d)) {
    long long job_id = 0;
    int attempt = 0, used = 0;
    std::string name = e->d_name;
    if (std::sscanf(name.c_str(), "%lld-%d%n", &job_id, &attempt, &used) != 2 ||
        used != static_cast<int>(name.size()) || job_id <= 0 || attempt <= 0) {
      continue;
    }
    fn(static_cast<int64_t>(job_id), attempt);
  }
  closedir(d);
}

std::vector<FoundAttempt> UnsettledAttempts(const std::string& data_dir) {
  std::vector<FoundAttempt> out;
  ForEachAttemptDir(data_dir, [&](int64_t job_id, int attempt) {
    std::string dir = attempt::DirOf(data_dir, job_id, attempt);
    if (attempt::FileExists(dir + "/" + attempt::kReportedStateFile)) return;  // settled
    FoundAttempt f;
    f.job_id = job_id;
    f.attempt = attempt;
    f.dir = dir;
    f.state = attempt::ReadState(dir);
    f.shim_alive = attempt::ShimAlive(dir);
    out.push_back(std::move(f));
  });
  return out;
}

attempt::Outcome FinalOutcome(int64_t job_id, int attempt, const std::string& dir,
                              const std::string& container_host) {
  // A shim killed after the job's exit was recorded may still have left its
  // cgroup; one killed before left the job in it too.
  int left_in_cgroup =
      container_host.empty() ? 0 : RemoveJobCgroup(container_host, job_id, attempt);
  auto state = attempt::ReadState(dir);
  if (state.outcome) return *state.outcome;
  // The shim died without recording an outcome (killed, crashed, machine
  // rebooted). The job must not run on unwatched: kill what is left of it.
  attempt::Outcome o;
  o.kind = model::ExitOutcome::kLost;
  o.status.error = "the job's shim ended without recording the job's exit";
  bool killed = left_in_cgroup > 0;
  if (state.started && attempt::SignalProcess(state.started->job, SIGKILL)) {
    kill(-state.started->job.pid, SIGKILL);  // verified alive just now: its group is the job's
    killed = true;
  }
  if (killed) o.status.error += "; the job was still running and was killed";
  std::string err;
  if (!attempt::AppendRecord(dir, attempt::ToJson(o), &err)) {
    spdlog::warn("job={} attempt={} {}", job_id, attempt, err);
  }
  return o;
}

int LatestAttemptOnDisk(const std::string& data_dir, int64_t job_id) {
  int best = 0;
  ForEachAttemptDir(data_dir, [&](int64_t job, int attempt) {
    if (job == job_id) best = std::max(best, attempt);
  });
  return best;
}

bool MarkSettled(const std::string& dir, std::string* error) {
  // A rename, not a new file: creating inodes is what per-job work costs most.
  std::string from = dir + "/" + attempt::kStateFile;
  std::string to = dir + "/" + attempt::kReportedStateFile;
  if (rename(from.c_str(), to.c_str()) == 0 || errno == ENOENT) return true;
  *error = "cannot rename " + from + ": " + std::strerror(errno);
  return false;
}

Supervisor::RecoverSummary Supervisor::Recover() {
  RecoverSummary summary;
  if (!runner_->RunsProcesses()) return summary;  // the sim runner leaves nothing behind
  std::vector<std::shared_ptr<Record>> finished;
  for (const FoundAttempt& found : UnsettledAttempts(options_.data_dir)) {
    auto rec = NewRecord(found.job_id, found.attempt);
    rec->uid = attempt::ReadUid(rec->dir);
    if (const auto& job = found.state.started) {
      rec->pid = job->job.pid;
      rec->handle.shim = job->shim;
      rec->spec.stop_grace_seconds = job->stop_grace_seconds;
    }
    if (found.shim_alive) {
      Adopt(rec);
      ++summary.adopted;
      continue;
    }
    // No shim, no outcome, no job: never started (hostd died before the
    // launch, or Stop() reserved it). The reconcile reports it if the database cares.
    if (!found.state.started && !found.state.outcome) continue;
    rec->state = model::AttemptState::kRunning;  // until Finish() reads its outcome
    {
      std::lock_guard<std::mutex> lock(mu_);
      records_[{found.job_id, found.attempt}] = rec;
    }
    finished.push_back(rec);
  }
  for (auto& rec : finished) SettleFinished(rec, &summary);
  summary.cgroups_removed = RemoveLeftoverCgroups();
  return summary;
}

int Supervisor::RemoveLeftoverCgroups() {
  if (!caps_.has_cgroup) return 0;
  return hostd::RemoveLeftoverCgroups(options_.host_id, [this](int64_t job_id, int attempt) {
    return attempt::ShimAlive(attempt::DirOf(options_.data_dir, job_id, attempt));
  });
}

void Supervisor::Adopt(const std::shared_ptr<Record>& rec) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    rec->state = rec->pid > 0 ? model::AttemptState::kRunning
                              : model::AttemptState::kStarting;  // Watch() learns the pid
    records_[{rec->job_id, rec->attempt}] = rec;
    // The previous hostd may have died before reporting it: running
    // reports are idempotent, so say it again.
    if (rec->pid > 0) Emit(*rec, model::Report::Running(rec->job_id, rec->attempt, rec->pid));
  }
  spdlog::info("job={} attempt={} re-attached to running job pid={} shim={}", rec->job_id,
               rec->attempt, rec->pid, rec->handle.shim.pid);
  std::thread([this, rec] { Watch(rec); }).detach();
}

void Supervisor::SettleFinished(const std::shared_ptr<Record>& rec, RecoverSummary* summary) {
  // The job ran: make sure the database heard "running" before its end
  // (a lost or start_failed outcome needs no "running" first).
  auto outcome = attempt::ReadState(rec->dir).outcome;
  if (rec->pid > 0 && (!outcome || outcome->kind == model::ExitOutcome::kExited)) {
    std::lock_guard<std::mutex> lock(mu_);
    Emit(*rec, model::Report::Running(rec->job_id, rec->attempt, rec->pid));
  }
  Finish(rec, FinalOutcome(rec->job_id, rec->attempt, rec->dir, ContainerHost()));
  std::lock_guard<std::mutex> lock(mu_);
  if (rec->state == model::AttemptState::kLost) {
    ++summary->lost;
  } else {
    ++summary->finished;
  }
}

}  // namespace pgfleet::hostd
