#include "core/placement/limits.h"

#include <string>

namespace pgfleet::placement {

std::string MaxRunningReason(const std::string& formation, int max_running) {
  return "waiting for max_running " + std::to_string(max_running) + " of formation " + formation;
}

std::string QuotaReason(const std::string& owner, const OwnerQuota& q, const LimitedJob& job) {
  if (q.max_running && q.running + 1 > *q.max_running) {
    return "owner " + owner + " at quota: running " + std::to_string(q.running) + " of " +
           std::to_string(*q.max_running) + " jobs";
  }
  if (q.max_cpu && q.cpu + job.cpu > *q.max_cpu) {
    return "owner " + owner + " at quota: cpu " + std::to_string(q.cpu) + " of " +
           std::to_string(*q.max_cpu) + "m in use (this job asks " + std::to_string(job.cpu) + "m)";
  }
  if (q.max_memory && q.memory + job.memory > *q.max_memory) {
    return "owner " + owner + " at quota: memory " + std::to_string(q.memory) + " of " +
           std::to_string(*q.max_memory) + " MiB in use (this job asks " +
           std::to_string(job.memory) + " MiB)";
  }
  return "";
}

LimitSplit ApplyLimits(const std::vector<LimitedJob>& jobs, const Limits& limits) {
  LimitSplit out;
  int64_t live = limits.live;
  bool formation_full = false;
  std::map<std::string, OwnerQuota> owners = limits.owners;  // charged as jobs are kept
  std::map<std::string, std::string> blocked;                // owner -> the reason its head met
  for (const auto& j : jobs) {
    if (limits.max_running > 0 && (formation_full || live >= limits.max_running)) {
      formation_full = true;
      out.waiting[j.id] = MaxRunningReason(limits.formation, limits.max_running);
      continue;
    }
    auto q = owners.find(j.owner);
    if (q != owners.end()) {
      if (auto b = blocked.find(j.owner); b != blocked.end()) {
        out.waiting[j.id] = b->second;
        continue;
      }
      std::string why = QuotaReason(j.owner, q->second, j);
      if (!why.empty()) {
        blocked[j.owner] = why;
        out.waiting[j.id] = std::move(why);
        continue;
      }
      q->second.cpu += j.cpu;
      q->second.memory += j.memory;
      ++q->second.running;
    }
    ++live;
    out.kept.push_back(j.id);
  }
  return out;
}

}  // namespace pgfleet::placement
