// Supervisor: what it knows of its attempts, for the API, the agent's
// reconcile and heartbeats (supervisor.h). Every answer is read under the
// supervisor's lock; starting, watching and finishing attempts is in
// supervisor.cpp.

#include <chrono>

#include "core/util/mutex.h"
#include "hostd/supervisor/supervisor.h"

namespace pgfleet::hostd {

using Clock = std::chrono::steady_clock;

bool Supervisor::Known(int64_t job_id, int attempt) const {
  util::MutexLock lock(mu_);
  return records_.count({job_id, attempt}) > 0;
}

bool Supervisor::Live(int64_t job_id, int attempt) const {
  util::MutexLock lock(mu_);
  auto it = records_.find({job_id, attempt});
  return it != records_.end() && !it->second->exit;
}

std::vector<JobInfo> Supervisor::List() const {
  util::MutexLock lock(mu_);
  std::vector<JobInfo> out;
  for (auto& [key, r] : records_) out.push_back(r->Info());
  return out;
}

std::optional<JobInfo> Supervisor::Latest(int64_t job_id) const {
  util::MutexLock lock(mu_);
  std::optional<JobInfo> out;
  for (auto& [key, r] : records_) {
    if (key.first == job_id) out = r->Info();
  }
  return out;
}

std::optional<JobInfo> Supervisor::Attempt(int64_t job_id, int attempt) const {
  if (attempt <= 0) return Latest(job_id);
  util::MutexLock lock(mu_);
  auto it = records_.find({job_id, attempt});
  if (it == records_.end()) return std::nullopt;
  return it->second->Info();
}

std::string Supervisor::LogPath(int64_t job_id, int attempt) const {
  return runner_->LogPath(job_id, attempt);
}

std::vector<std::pair<int64_t, int>> Supervisor::LiveStartedBefore(Clock::time_point t) const {
  util::MutexLock lock(mu_);
  std::vector<std::pair<int64_t, int>> out;
  for (auto& [key, r] : records_) {
    if (!r->exit && r->started < t) out.push_back(key);
  }
  return out;
}

std::vector<std::string> Supervisor::LiveAttemptKeys() const {
  util::MutexLock lock(mu_);
  std::vector<std::string> out;
  for (auto& [key, r] : records_) {
    if (!r->exit)
      out.push_back(std::to_string(key.first) + '/' + std::to_string(key.second) + '/' + r->uid);
  }
  return out;
}

std::vector<std::string> Supervisor::RecentRootfs() const {
  util::MutexLock lock(mu_);
  return {recent_rootfs_.begin(), recent_rootfs_.end()};
}

size_t Supervisor::LiveCount() const {
  util::MutexLock lock(mu_);
  size_t n = 0;
  for (auto& [key, r] : records_) n += r->exit ? 0 : 1;
  return n;
}

}  // namespace pgfleet::hostd
