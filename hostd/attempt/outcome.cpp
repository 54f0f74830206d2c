#include "hostd/attempt/outcome.h"

#include <dirent.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "hostd/drivers/container/container.h"
#include "hostd/network/attachment.h"

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
  // Its network (network "bridge"), if the shim did not take it down: the
  // job is gone now (killed above, or ended), so nothing uses it any more.
  if (network::HasSavedAttachment(dir)) {
    std::string error;
    if (network::DetachSaved(dir, &error)) {
      spdlog::info("job={} attempt={} network taken down after its shim", job_id, attempt);
    } else {
      spdlog::warn("job={} attempt={} network not taken down (retried at the next restart): {}",
                   job_id, attempt, error);
    }
  }
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


}  // namespace pgfleet::hostd
