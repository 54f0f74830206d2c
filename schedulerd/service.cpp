#include "schedulerd/service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/placement/reconcile.h"

namespace pgfleet::schedulerd {
namespace {

// Most replicas one formation pass creates.
constexpr int kMaxReplicasPerPass = 500;

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
  if (!result.to_stop.empty()) {
    // Stopping what remains wanted after the creations is a scale-down;
    // anything else replaces replicas on a leaving host.
    bool scaled_down = static_cast<int>(live.size()) - static_cast<int>(result.to_stop.size()) +
                           result.to_create >=
                       replicas;
    std::string reason = scaled_down ? "service " + formation.name + " scaled to " +
                                           std::to_string(replicas) + " replicas"
                                     : "moved off a draining host";
    store.StopJobs(result.to_stop, reason);
  }
  if (result.to_create > 0 || !result.to_stop.empty()) {
    metrics.Add("pgfleet_scheduler_replicas_created_total", result.to_create);
    metrics.Add("pgfleet_scheduler_replicas_stopped_total",
                static_cast<double>(result.to_stop.size()));
    spdlog::info("formation={} service replicas={} live={} create={} stop={}", formation.name,
                 replicas, live.size(), result.to_create, result.to_stop.size());
  }
}

}  // namespace pgfleet::schedulerd
