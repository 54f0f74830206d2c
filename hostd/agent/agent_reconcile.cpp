// The Agent's reconcile: when the heartbeats' answers call for one, the
// attempts the database assigns this host are compared with the ones it runs,
// and hostd starts, stops, kills or reports again what differs. (The rest of
// the Agent: agent.cpp; report delivery: agent_reports.cpp.)

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <set>

#include "core/model/job_spec.h"
#include "core/model/json_limits.h"
#include "hostd/agent/agent.h"

namespace pgfleet::hostd {

void Agent::Reconcile(pqxx::connection& conn) {
  auto snapshot_time = Clock::now();
  std::vector<store::HostJob> jobs;
  {
    pqxx::nontransaction tx(conn);  // one read-only statement
    jobs = store::AssignedJobs(tx, config_.id);
  }
  std::set<std::pair<int64_t, int>> wanted;
  for (const auto& job : jobs) wanted.insert({job.job, job.attempt});
  for (const auto& job : jobs) {
    // Starting what never arrived takes a while per job (a burst of hundreds
    // took ten seconds on a loaded machine, long enough to self-fence):
    // the lease is renewed in between.
    HeartbeatIfDue(conn);
    if (!registered_) return;  // declared lost meanwhile: the next step re-registers
    ReconcileJob(job);
  }
  // Fencing: anything live here that the database no longer assigns to us was
  // superseded (host declared lost, dispatch requeued). Only attempts started
  // before the snapshot are judged, so a fresh dispatch is never mistaken.
  for (const auto& key : supervisor_->LiveStartedBefore(snapshot_time)) {
    if (!wanted.count(key)) supervisor_->Kill(key.first, key.second);
  }
}

bool Agent::ViewDiffers() const {
  if (db_live_digest_.empty() || db_stops_ > 0) return true;
  // As pgfleet.heartbeat: the XOR of the first 64 bits (big-endian) of each
  // live attempt's md5("job/attempt/uid"), as a signed number.
  uint64_t digest = 0;
  for (const auto& key : supervisor_->LiveAttemptKeys()) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(key.data(), key.size(), md, &len, EVP_md5(), nullptr) != 1) return true;
    uint64_t head = 0;
    for (int i = 0; i < 8; ++i) head = (head << 8) | md[i];
    digest ^= head;
  }
  return std::to_string(static_cast<int64_t>(digest)) != db_live_digest_;
}

void Agent::ReconcileJob(const store::HostJob& job) {
  if (!job.state) {
    spdlog::error("job={} attempt={} has state \"{}\", unknown to this hostd: left alone", job.job,
                  job.attempt, job.state_name);
    return;
  }
  // What this host has by that id and attempt may be another job's.
  supervisor_->ForgetOtherJob(job.job, job.attempt, job.uid);
  if (job.stop_wanted) {
    if (!supervisor_->Stop(job.job, job.attempt, job.stop_force)) {
      supervisor_->StopBeforeStart(job.job, job.attempt);
    }
    return;
  }
  if (supervisor_->Known(job.job, job.attempt)) {
    // Live in the database, yet it ended here. Either our reports were
    // rejected because they beat the assignment's commit (a scheduler that
    // dispatched what it then rolled back, and later assigned the same
    // attempt for real), or the database accepted its end and then lost it
    // (failed over to a standby that never got that commit, or restored).
    // It ran here exactly once; say how it went, again.
    for (auto& report : supervisor_->Replay(job.job, job.attempt)) Enqueue(std::move(report));
    return;
  }
  if (*job.state == model::JobState::kRunning) {
    // Reported running by an earlier life of this hostd, and nothing on
    // disk to re-attach to (Recover() adopted every attempt with a shim).
    Enqueue(NoTraceOfAttempt(job.job, job.attempt, job.uid));
    return;
  }
  // Assigned to us but never delivered (scheduler died after commit, lost request).
  model::JobSpec spec;
  try {
    spec = model::ParseJobSpec(model::ParseBoundedJson(job.spec_json, "spec"));
    spec.uid = job.uid;
  } catch (const std::exception& e) {
    Enqueue(model::Report::StartFailed(job.job, job.attempt,
                                       std::string("invalid job spec: ") + e.what()));
    return;
  }
  std::string err;
  auto res = supervisor_->Start(job.job, job.attempt, spec, &err);
  if (res == Supervisor::StartResult::kPreviousLife) {
    Enqueue(NoTraceOfAttempt(job.job, job.attempt, job.uid));
  } else if (res == Supervisor::StartResult::kStarted) {
    spdlog::info("job={} attempt={} started by reconcile (dispatch never arrived)", job.job,
                 job.attempt);
  } else if (res == Supervisor::StartResult::kFenced) {
    spdlog::debug("job={} attempt={} not started yet: {}", job.job, job.attempt, err);
  }
}

}  // namespace pgfleet::hostd
