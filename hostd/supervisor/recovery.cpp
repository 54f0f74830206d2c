// Supervisor::Recover() and what it needs: re-attaching a new hostd to the
// attempts an earlier one left (hostd/attempt/outcome.h reads them).

#include <spdlog/spdlog.h>

#include <thread>

#include "core/util/mutex.h"
#include "hostd/attempt/outcome.h"
#include "hostd/drivers/container/container.h"
#include "hostd/network/attachment.h"
#include "hostd/supervisor/supervisor.h"

namespace pgfleet::hostd {

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
      rec->handle.address = job->address;
      rec->spec.stop_grace_seconds = job->stop_grace_seconds;
    }
    if (found.shim_alive) {
      rec->spec.health_check = attempt::ReadHealthCheck(rec->dir);  // checked again from now
      Adopt(rec);
      ++summary.adopted;
      continue;
    }
    // No shim, no outcome, no job: never started (hostd died before the
    // launch, or Stop() reserved it). The reconcile reports it if the database cares.
    if (!found.state.started && !found.state.outcome) continue;
    rec->state = model::AttemptState::kRunning;  // until Finish() reads its outcome
    {
      util::MutexLock lock(mu_);
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
    util::MutexLock lock(mu_);
    rec->state = rec->pid > 0 ? model::AttemptState::kRunning
                              : model::AttemptState::kStarting;  // Watch() learns the pid
    records_[{rec->job_id, rec->attempt}] = rec;
    // The previous hostd may have died before reporting it: running
    // reports are idempotent, so say it again.
    if (rec->pid > 0) Emit(*rec, model::Report::Running(rec->job_id, rec->attempt, rec->pid));
  }
  spdlog::info("job={} attempt={} re-attached to running job pid={} shim={}", rec->job_id,
               rec->attempt, rec->pid, rec->handle.shim.pid);
  const bool started = rec->pid > 0;  // its network, if any, was set up (ADD ran)
  std::thread([this, rec, started] {
    // Its network (network "bridge") outlived hostd with its shim: say so
    // if it is no longer as ADD left it (CNI CHECK). Its DEL is unchanged.
    std::string error;
    if (started && network::HasSavedAttachment(rec->dir)) {
      if (network::CheckSaved(rec->dir, &error)) {
        spdlog::info("job={} attempt={} network as it was set up (CNI CHECK)", rec->job_id,
                     rec->attempt);
      } else {
        spdlog::warn("job={} attempt={} network not as it was set up (CNI CHECK): {}", rec->job_id,
                     rec->attempt, error);
      }
    }
    Watch(rec);
  }).detach();
}

void Supervisor::SettleFinished(const std::shared_ptr<Record>& rec, RecoverSummary* summary) {
  // The job ran: make sure the database heard "running" before its end
  // (a lost or start_failed outcome needs no "running" first).
  auto outcome = attempt::ReadState(rec->dir).outcome;
  if (rec->pid > 0 && (!outcome || outcome->kind == model::ExitOutcome::kExited)) {
    util::MutexLock lock(mu_);
    Emit(*rec, model::Report::Running(rec->job_id, rec->attempt, rec->pid));
  }
  Finish(rec, FinalOutcome(rec->job_id, rec->attempt, rec->dir, ContainerHost()));
  util::MutexLock lock(mu_);
  if (rec->state == model::AttemptState::kLost) {
    ++summary->lost;
  } else {
    ++summary->finished;
  }
}

}  // namespace pgfleet::hostd
