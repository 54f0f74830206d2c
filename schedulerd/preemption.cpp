#include "schedulerd/preemption.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <utility>

namespace pgfleet::schedulerd {

std::string WaitingForVictimsReason(const std::string& host, const std::vector<int64_t>& victims) {
  std::string ids;
  for (int64_t v : victims) ids += (ids.empty() ? "" : ", ") + std::to_string(v);
  return "waiting for " + std::to_string(victims.size()) + " preempted jobs to stop on host " +
         host + " (" + ids + ")";
}

std::map<int64_t, std::string> Preemptor::Run(
    PassStore& store, int formation_id,
    const std::vector<std::pair<placement::JobRequest, std::string>>& waiting,
    std::vector<placement::HostView> hosts, Clock::time_point now) {
  std::map<int64_t, std::string> out;
  if (waiting.empty() || hosts.empty()) return out;
  int first = 0;  // the highest priority waiting (claimed jobs come in priority order)
  for (const auto& [job, reason] : waiting) first = std::max(first, job.priority);
  if (auto q = quiet_until_.find(formation_id); q != quiet_until_.end()) {
    // Quiet unless a job of higher priority than the last look's came.
    if (now < q->second.first && first <= q->second.second) return out;
    quiet_until_.erase(q);
  }
  std::vector<int64_t> ids;
  for (const auto& [job, reason] : waiting) {
    if (ids.size() == kMaxLooks) break;
    ids.push_back(job.id);
  }
  const std::set<int64_t> held = store.WaitingForVictims(ids);
  int top = -1;  // the highest priority still looking for room
  for (const auto& [job, reason] : waiting) {
    if (held.count(job.id)) {
      out[job.id] = reason;  // as pgfleet.preempt wrote it: unchanged
    } else if (std::find(ids.begin(), ids.end(), job.id) != ids.end()) {
      top = std::max(top, job.priority);
    }
  }
  if (top <= 0) return out;  // nothing is of lower priority than 0
  store::PreemptionInputs in = store.ReadPreemptionInputs(top);
  int preempted = 0;
  for (const auto& [job, reason] : waiting) {
    if (preempted == kMaxPreemptions) break;
    if (held.count(job.id) || std::find(ids.begin(), ids.end(), job.id) == ids.end()) continue;
    auto choice = placement::PickVictims(job, hosts, in.running, in.may_lose);
    if (!choice || choice->victims.empty()) continue;  // none; or room already (held elsewhere)
    const int stopped = store.Preempt(job.id, choice->host_id, choice->victims);
    if (stopped == 0) {
      metrics_.Add("pgfleet_scheduler_preemptions_refused_total", 1);
      continue;  // changed since read: the next pass chooses again
    }
    ++preempted;
    metrics_.Add("pgfleet_scheduler_preemptions_total", 1);
    metrics_.Add("pgfleet_scheduler_preempted_jobs_total", stopped);
    spdlog::info("job={} priority={} preempts {} jobs on host={}", job.id, job.priority,
                 choice->victims.size(), choice->host_id);
    out[job.id] = WaitingForVictimsReason(choice->host_id, choice->victims);
    // Charge this pass's view: the job takes the room its victims leave.
    const std::set<int64_t> victims(choice->victims.begin(), choice->victims.end());
    for (auto& h : hosts) {
      if (h.id != choice->host_id) continue;
      h.cpu_allocated += job.cpu;
      h.memory_allocated += job.memory;
      for (const auto& r : in.running) {
        if (!victims.count(r.id)) continue;
        h.cpu_allocated -= r.cpu;
        h.memory_allocated -= r.memory;
        if (auto b = in.may_lose.find(r.formation); b != in.may_lose.end()) --b->second;
      }
    }
    in.running.erase(
        std::remove_if(in.running.begin(), in.running.end(),
                       [&](const placement::RunningJob& r) { return victims.count(r.id) > 0; }),
        in.running.end());
  }
  if (preempted == 0) quiet_until_[formation_id] = {now + kLookAgainAfter, first};
  return out;
}

}  // namespace pgfleet::schedulerd
