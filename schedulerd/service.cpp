#include "schedulerd/service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/placement/reconcile.h"

namespace pgfleet::schedulerd {
namespace {

// Most replicas one formation pass creates.
constexpr int kMaxReplicasPerPass = 500;

// Stops `to_stop`, each with the reason that names what happened: a replica
// moved off a draining or offline host names that host; any other is a
// scale-down. One stop_jobs call per distinct reason.
void StopWithReasons(PassStore& store, const store::Formation& formation, int replicas,
                     const std::vector<placement::ReplicaView>& live,
                     const std::vector<int64_t>& to_stop) {
  std::map<int64_t, const placement::ReplicaView*> by_id;
  for (const auto& r : live) by_id[r.id] = &r;
  std::map<std::string, std::vector<int64_t>> by_reason;
  for (int64_t id : to_stop) {
    auto it = by_id.find(id);
    std::string reason = "service " + formation.name + " scaled to " + std::to_string(replicas) +
                         (replicas == 1 ? " replica" : " replicas");
    if (it != by_id.end() && it->second->on_leaving_host) {
      reason = "moved off " + it->second->host_state + " host " + it->second->host_id;
    }
    by_reason[reason].push_back(id);
  }
  for (const auto& [reason, ids] : by_reason) store.StopJobs(ids, reason);
}

}  // namespace

void ReconcileReplicas(PassStore& store, const store::Formation& formation, int replicas,
                       metrics::Registry& metrics) {
  auto live = store.LiveReplicas(formation.name);
  auto result = placement::ReconcileService(replicas, live);
  // Bounded per pass, so a huge replica count never becomes one giant insert
  // that holds the formation's lock (and the scheduler) for long; the next
  // pass creates the rest.
  result.to_create = std::min(result.to_create, kMaxReplicasPerPass);
  if (result.to_create > 0) store.CreateReplicas(formation.id, result.to_create);
  if (!result.to_stop.empty()) StopWithReasons(store, formation, replicas, live, result.to_stop);
  if (result.to_create > 0 || !result.to_stop.empty()) {
    metrics.Add("pgfleet_scheduler_replicas_created_total", result.to_create);
    metrics.Add("pgfleet_scheduler_replicas_stopped_total",
                static_cast<double>(result.to_stop.size()));
    spdlog::info("formation={} service replicas={} live={} create={} stop={}", formation.name,
                 replicas, live.size(), result.to_create, result.to_stop.size());
  }
}

void ReconcileSystemReplicas(PassStore& store, const store::Formation& formation,
                             metrics::Registry& metrics) {
  auto live = store.LiveReplicas(formation.name);
  auto result = placement::ReconcileSystem(store.SystemHosts(formation.id), live);
  if (result.create_on.size() > static_cast<size_t>(kMaxReplicasPerPass)) {
    result.create_on.resize(kMaxReplicasPerPass);  // the next pass makes the rest
  }
  if (!result.create_on.empty()) store.CreateSystemReplicas(formation.id, result.create_on);
  if (!result.to_stop.empty()) {
    std::map<int64_t, const placement::ReplicaView*> by_id;
    for (const auto& r : live) by_id[r.id] = &r;
    std::map<std::string, std::vector<int64_t>> by_reason;
    for (int64_t id : result.to_stop) {
      const auto* r = by_id.at(id);
      const std::string& host = r->pinned_host.empty() ? r->host_id : r->pinned_host;
      std::string why = r->host_state.empty() || r->host_state == "up"
                            ? "host " + host + " is no longer eligible"
                            : "host " + host + " is " + r->host_state;
      by_reason["system formation " + formation.name + ": " + why].push_back(id);
    }
    for (const auto& [reason, ids] : by_reason) store.StopJobs(ids, reason);
  }
  if (!result.create_on.empty() || !result.to_stop.empty()) {
    metrics.Add("pgfleet_scheduler_replicas_created_total",
                static_cast<double>(result.create_on.size()));
    metrics.Add("pgfleet_scheduler_replicas_stopped_total",
                static_cast<double>(result.to_stop.size()));
    spdlog::info("formation={} system live={} create={} stop={}", formation.name, live.size(),
                 result.create_on.size(), result.to_stop.size());
  }
}

void ReconcileSysbatchJobs(PassStore& store, const store::Formation& formation, bool done,
                           metrics::Registry& metrics) {
  auto jobs = store.SysbatchJobs(formation.id);
  auto result = placement::ReconcileSysbatch(store.SystemHosts(formation.id), jobs, done);
  if (result.create_on.size() > static_cast<size_t>(kMaxReplicasPerPass)) {
    result.create_on.resize(kMaxReplicasPerPass);  // the next pass makes the rest
  }
  // None once the formation is done, whatever `done` said when it was read.
  int created =
      result.create_on.empty() ? 0 : store.CreateSysbatchJobs(formation.id, result.create_on);
  if (!result.to_cancel.empty()) {
    std::map<int64_t, std::string> host_of;
    for (const auto& j : jobs) host_of[j.id] = j.host;
    std::map<std::string, std::vector<int64_t>> by_reason;
    for (int64_t id : result.to_cancel) {
      by_reason["sysbatch formation " + formation.name + ": host " + host_of[id] +
                " was removed before the job ran"]
          .push_back(id);
    }
    for (const auto& [reason, ids] : by_reason) store.StopJobs(ids, reason);
  }
  if (created > 0 || !result.to_cancel.empty()) {
    metrics.Add("pgfleet_scheduler_sysbatch_jobs_created_total", created);
    metrics.Add("pgfleet_scheduler_sysbatch_jobs_cancelled_total",
                static_cast<double>(result.to_cancel.size()));
    spdlog::info("formation={} sysbatch jobs={} done={} create={} cancel={}", formation.name,
                 jobs.size(), done, created, result.to_cancel.size());
  }
}

}  // namespace pgfleet::schedulerd
