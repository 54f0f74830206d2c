// Supervisor: what the health monitor (hostd/health/) asks of it: the
// running attempts to check, their changes of health as reports, and
// stopping one that failed its checks (supervisor.h).

#include <spdlog/spdlog.h>

#include "core/util/mutex.h"
#include "hostd/supervisor/supervisor.h"

namespace pgfleet::hostd {

using model::AttemptState;

bool Supervisor::StopUnhealthy(int64_t job_id, int attempt, const std::string& uid,
                               const std::string& reason) {
  util::MutexLock lock(mu_);
  auto it = records_.find({job_id, attempt});
  if (it == records_.end() || it->second->OfAnotherJobThan(uid)) return false;
  auto rec = it->second;
  if (rec->state != AttemptState::kRunning || !rec->stop_reason.empty()) return false;
  rec->stop_reason = reason;
  spdlog::warn("job={} attempt={} unhealthy: stopping it (grace {}s): {}", job_id, attempt,
               rec->spec.stop_grace_seconds, reason);
  StopRecord(rec, rec->spec.stop_grace_seconds, false);
  return true;
}

std::vector<HealthTarget> Supervisor::HealthTargets() const {
  util::MutexLock lock(mu_);
  std::vector<HealthTarget> out;
  for (const auto& [key, rec] : records_) {
    if (rec->state != AttemptState::kRunning || !rec->spec.health_check || rec->stale) continue;
    out.push_back(HealthTarget{rec->job_id, rec->attempt, rec->uid, rec->pid, rec->started,
                               *rec->spec.health_check});
  }
  return out;
}

bool Supervisor::ReportHealth(int64_t job_id, int attempt, const std::string& uid,
                              model::Health health, const std::string& output) {
  util::MutexLock lock(mu_);
  auto it = records_.find({job_id, attempt});
  if (it == records_.end() || it->second->OfAnotherJobThan(uid) || it->second->exit) return false;
  Emit(*it->second, model::Report::HealthChanged(job_id, attempt, health, output));
  return true;
}

}  // namespace pgfleet::hostd
