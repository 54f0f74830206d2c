// Supervisor: stopping, killing and fencing attempts, and replaying the end
// of one the database lost (supervisor.h). Starting, watching and finishing
// them is in supervisor.cpp; what the health monitor asks, in
// supervisor_health.cpp.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "core/util/mutex.h"
#include "hostd/supervisor/supervisor.h"

namespace pgfleet::hostd {

using model::AttemptState;

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
      util::MutexLock lock(mu_);
      Signal(*rec, attempt::kStopSignal);
      cv_.wait_for(lock, std::chrono::seconds(grace_seconds), [&] {
        mu_.AssertHeld();
        return rec->exit.has_value();
      });
    }
    util::MutexLock lock(mu_);
    if (!rec->exit) Signal(*rec, attempt::kKillSignal);
    --threads_;
    cv_.notify_all();
  }).detach();
}

bool Supervisor::Stop(int64_t job_id, int attempt, bool force) {
  util::MutexLock lock(mu_);
  std::shared_ptr<Record> rec;
  for (auto& [key, r] : records_) {
    if (key.first == job_id && (attempt == 0 || key.second == attempt)) rec = r;
  }
  // Not known here: nothing is created for it (anyone could name any future
  // attempt). If its dispatch is still on its way, it starts and is stopped
  // then: the scheduler forwards a stop on every pass while the database wants
  // the job stopped, and reconcile stops it too.
  if (!rec) return false;
  if (force) {
    // At once, also when a stop is already waiting out its grace.
    if (rec->state == AttemptState::kStopping && !rec->exit) {
      if (!rec->force_stopped) {
        rec->force_stopped = true;
        spdlog::info("job={} attempt={} force-stopped during its grace: SIGKILL", job_id,
                     rec->attempt);
        Signal(*rec, attempt::kKillSignal);
      }
      return true;
    }
    if (rec->state == AttemptState::kRunning || rec->state == AttemptState::kStarting) {
      spdlog::info("job={} attempt={} force-stopped: SIGKILL", job_id, rec->attempt);
      rec->force_stopped = true;
    }
    StopRecord(rec, 0, true);
    return true;
  }
  spdlog::info("job={} attempt={} stopping (grace {}s)", job_id, rec->attempt,
               rec->spec.stop_grace_seconds);
  StopRecord(rec, rec->spec.stop_grace_seconds, false);
  return true;
}

bool Supervisor::StopBeforeStart(int64_t job_id, int attempt) {
  util::MutexLock lock(mu_);
  if (records_.count({job_id, attempt})) return false;
  auto r = NewRecord(job_id, attempt);
  std::string error;
  if (runner_->ClaimAttempt(job_id, attempt, "", &error) != AttemptRunner::Claim::kClaimed) {
    return false;
  }
  records_[{job_id, attempt}] = r;
  FailRecord(r, "stopped before it started");
  return true;
}

void Supervisor::Kill(int64_t job_id, int attempt) {
  util::MutexLock lock(mu_);
  auto it = records_.find({job_id, attempt});
  if (it != records_.end()) KillRecord(it->second);
}

void Supervisor::KillRecord(const std::shared_ptr<Record>& rec) {
  if (!model::IsLive(rec->state)) return;
  spdlog::warn("job={} attempt={} superseded: killing it (pid={})", rec->job_id, rec->attempt,
               rec->pid);
  if (rec->state == AttemptState::kStopping) {
    Signal(*rec, attempt::kKillSignal);
  } else {
    StopRecord(rec, 0, true);
  }
}

void Supervisor::Rejected(int64_t job_id, int attempt, const std::string& uid) {
  // Judged and killed under one lock: a start that takes this id and attempt
  // for another job comes wholly before or after.
  util::MutexLock lock(mu_);
  auto it = records_.find({job_id, attempt});
  if (it == records_.end()) return;
  if (it->second->OfAnotherJobThan(uid)) {
    // The answer to a report of the attempt ForgetOtherJob dropped: the one
    // here now is another job's, and nothing about it was said.
    spdlog::info(
        "job={} attempt={}: a rejected report was about another job (uid {}; {} is "
        "here now): nothing to kill",
        job_id, attempt, uid, it->second->uid);
    return;
  }
  it->second->rejected = true;
  KillRecord(it->second);
}

std::vector<model::Report> Supervisor::Replay(int64_t job_id, int attempt) {
  util::MutexLock lock(mu_);
  auto it = records_.find({job_id, attempt});
  if (it == records_.end()) return {};
  auto& rec = it->second;
  if (!rec->exit || !rec->outcome_report || !(rec->rejected || rec->delivered)) return {};
  if (rec->rejected) {
    spdlog::warn(
        "job={} attempt={} is assigned here but already ran here (its reports were "
        "rejected): reporting its outcome again",
        job_id, attempt);
  } else {
    spdlog::warn(
        "job={} attempt={} is live in the database but ended here and its end was delivered: "
        "the database lost it (a failover or a restore): reporting its outcome again",
        job_id, attempt);
  }
  rec->rejected = false;
  rec->delivered = false;
  std::vector<model::Report> out;
  if (rec->pid > 0 || rec->ran) out.push_back(model::Report::Running(job_id, attempt, rec->pid));
  out.push_back(*rec->outcome_report);
  for (auto& report : out) report.uid = rec->uid;  // as Emit sent them
  return out;
}

size_t Supervisor::Fence(const std::string& reason) {
  util::MutexLock lock(mu_);
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
      Signal(*rec, attempt::kKillSignal);
    }
    ++n;
  }
  return n;
}

bool Supervisor::Fenced(std::string* reason) const {
  util::MutexLock lock(mu_);
  if (fenced_ && reason) *reason = fence_reason_;
  return fenced_;
}

void Supervisor::Unfence() {
  util::MutexLock lock(mu_);
  fenced_ = false;
  fence_reason_.clear();
}

}  // namespace pgfleet::hostd
