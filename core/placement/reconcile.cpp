#include "core/placement/reconcile.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace pgfleet::placement {
namespace {

// pending, assigned, running: the declaration order of ReplicaState.
int StateRank(model::ReplicaState state) { return static_cast<int>(state); }

// Order in which to stop replicas: least useful first.
bool StopsBefore(const ReplicaView& a, const ReplicaView& b) {
  int ra = StateRank(a.state), rb = StateRank(b.state);
  if (ra != rb) return ra < rb;
  return a.id > b.id;
}

}  // namespace

ReconcileResult ReconcileService(int desired, const std::vector<ReplicaView>& live) {
  desired = std::max(desired, 0);
  std::vector<ReplicaView> staying, leaving;
  for (const auto& r : live) (r.on_leaving_host ? leaving : staying).push_back(r);

  ReconcileResult out;
  int staying_count = static_cast<int>(staying.size());
  if (staying_count < desired) {
    out.to_create = desired - staying_count;
  } else if (staying_count > desired) {
    std::sort(staying.begin(), staying.end(), StopsBefore);
    for (int i = 0; i < staying_count - desired; ++i) out.to_stop.push_back(staying[i].id);
  }

  // Replicas on leaving hosts: those not serving yet go at once (a replacement
  // is already counted above); running ones go only as replacements are
  // healthy (for min_healthy_time), so never fewer than `desired` healthy
  // replicas serve during a drain.
  int staying_running = 0;
  for (const auto& r : staying) {
    staying_running += r.state == model::ReplicaState::kRunning && r.healthy ? 1 : 0;
  }
  staying_running = std::min(staying_running, desired);
  std::vector<ReplicaView> leaving_running;
  std::sort(leaving.begin(), leaving.end(), StopsBefore);
  for (const auto& r : leaving) {
    if (r.state == model::ReplicaState::kRunning) {
      leaving_running.push_back(r);
    } else {
      out.to_stop.push_back(r.id);
    }
  }
  int may_stop = std::max(0, staying_running + static_cast<int>(leaving_running.size()) - desired);
  for (int i = 0; i < may_stop && i < static_cast<int>(leaving_running.size()); ++i) {
    out.to_stop.push_back(leaving_running[i].id);
  }
  return out;
}

SystemReconcile ReconcileSystem(const std::vector<std::string>& eligible,
                                const std::vector<ReplicaView>& live) {
  const std::set<std::string> hosts(eligible.begin(), eligible.end());
  std::map<std::string, std::vector<const ReplicaView*>> by_host;
  SystemReconcile out;
  for (const auto& r : live) {
    const std::string& host = r.pinned_host.empty() ? r.host_id : r.pinned_host;
    if (!hosts.count(host)) {
      out.to_stop.push_back(r.id);
      continue;
    }
    by_host[host].push_back(&r);
  }
  for (const auto& host : eligible) {
    auto it = by_host.find(host);
    if (it == by_host.end()) {
      out.create_on.push_back(host);
      continue;
    }
    auto& rs = it->second;
    // Keep the most useful (running before assigned before pending), oldest first.
    std::sort(rs.begin(), rs.end(), [](const ReplicaView* a, const ReplicaView* b) {
      if (a->state != b->state) return StateRank(a->state) > StateRank(b->state);
      return a->id < b->id;
    });
    for (size_t i = 1; i < rs.size(); ++i) out.to_stop.push_back(rs[i]->id);
  }
  std::sort(out.to_stop.begin(), out.to_stop.end());
  return out;
}

SysbatchReconcile ReconcileSysbatch(const std::vector<std::string>& eligible,
                                    const std::vector<SysbatchJobView>& jobs, bool done) {
  std::set<std::string> had_one;
  SysbatchReconcile out;
  for (const auto& j : jobs) {
    had_one.insert(j.host);
    if (j.pending && !j.host_exists) out.to_cancel.push_back(j.id);
  }
  if (!done) {
    const std::set<std::string> hosts(eligible.begin(), eligible.end());
    for (const auto& host : hosts) {
      if (!had_one.count(host)) out.create_on.push_back(host);
    }
  }
  std::sort(out.to_cancel.begin(), out.to_cancel.end());
  return out;
}

}  // namespace pgfleet::placement
