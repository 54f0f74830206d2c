#include "schedulerd/rollout.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "core/placement/rollout.h"

namespace pgfleet::schedulerd {
namespace {

// Most replicas one rollout step creates (as a service pass: the next makes the rest).
constexpr int kMaxCreatePerStep = 500;

std::string Plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Ends a rollout past its deadline. True when auto_revert went back to an
// earlier version (whose rollout the next pass carries out).
bool Fail(PassStore& store, const store::Formation& formation, const store::ActiveRollout& ro,
          metrics::Registry& metrics) {
  std::string why = ro.state == "canary"
                        ? "the canaries of version " + std::to_string(ro.to_version) +
                              " were not healthy within " + ro.progress_deadline
                        : "no new replica of version " + std::to_string(ro.to_version) +
                              " became healthy within " + ro.progress_deadline + " (" +
                              std::to_string(ro.healthy) + " healthy)";
  auto back = store.FailRollout(ro.id, why);
  metrics.Add("pgfleet_scheduler_rollouts_failed_total", 1);
  spdlog::warn("formation={} rollout={} version={} failed: {}{}", formation.name, ro.id,
               ro.to_version, why, back ? "; reverting to version " + std::to_string(*back) : "");
  return back.has_value();
}

std::string Progress(const placement::RolloutStep& step, int desired, int version) {
  const std::string v = "version " + std::to_string(version);
  switch (step.phase) {
    case placement::RolloutPhase::kCanary:
      return "waiting for the canaries of " + v + " to be healthy (" +
             std::to_string(step.healthy) + " of " + std::to_string(step.updated) + ")";
    case placement::RolloutPhase::kWaitingPromotion:
      return Plural(step.healthy, "canary", "canaries") + " of " + v +
             " healthy: waiting for pgfleet.promote";
    default:
      return std::to_string(step.healthy) + " of " + std::to_string(desired) + " replicas of " + v +
             " healthy, " + Plural(step.old, "old replica", "old replicas") + " left";
  }
}

void Record(PassStore& store, const store::ActiveRollout& ro, const placement::RolloutStep& step,
            int desired, const store::Formation& formation, metrics::Registry& metrics) {
  if (step.phase == placement::RolloutPhase::kDone) {
    store.FinishRollout(ro.id, step.updated, step.healthy);
    metrics.Add("pgfleet_scheduler_rollouts_succeeded_total", 1);
    spdlog::info("formation={} rollout={} version={} succeeded: {} healthy", formation.name, ro.id,
                 ro.to_version, step.healthy);
    return;
  }
  store.RecordRolloutProgress(ro.id, std::string(placement::ToString(step.phase)), step.updated,
                              step.healthy, Progress(step, desired, ro.to_version));
}

void StopReplaced(PassStore& store, const placement::RolloutStep& step, int version,
                  metrics::Registry& metrics) {
  if (step.replace.empty()) return;
  store.StopJobs(step.replace, "replaced by version " + std::to_string(version));
  metrics.Add("pgfleet_scheduler_replicas_replaced_total",
              static_cast<double>(step.replace.size()));
}

}  // namespace

bool RollOutService(PassStore& store, const store::Formation& formation, int replicas,
                    metrics::Registry& metrics) {
  auto ro = store.ActiveRollout(formation.id);
  if (!ro) return false;
  if (ro->past_deadline) return Fail(store, formation, *ro, metrics);
  auto live = store.LiveReplicas(formation.name);
  placement::RolloutView view{ro->to_version,
                              placement::ResolveMaxParallel(ro->max_parallel, replicas), ro->canary,
                              ro->promoted, ro->stopping};
  auto step = placement::ReconcileRollout(replicas, view, live);
  int create = std::min(step.to_create, kMaxCreatePerStep);
  if (create > 0) store.CreateReplicas(formation.id, create);
  StopReplaced(store, step, ro->to_version, metrics);
  if (!step.surplus.empty()) {
    store.StopJobs(step.surplus, "service " + formation.name + " scaled to " +
                                     Plural(replicas, "replica", "replicas"));
  }
  Record(store, *ro, step, replicas, formation, metrics);
  if (create > 0 || !step.replace.empty() || !step.surplus.empty()) {
    metrics.Add("pgfleet_scheduler_replicas_created_total", create);
    spdlog::info(
        "formation={} rollout={} version={} {} create={} replace={} stop={} updated={} "
        "healthy={} old={}",
        formation.name, ro->id, ro->to_version, placement::ToString(step.phase), create,
        step.replace.size(), step.surplus.size(), step.updated, step.healthy, step.old);
  }
  return true;
}

bool RollOutSystem(PassStore& store, const store::Formation& formation,
                   metrics::Registry& metrics) {
  auto ro = store.ActiveRollout(formation.id);
  if (!ro) return false;
  if (ro->past_deadline) {
    Fail(store, formation, *ro, metrics);
    return true;
  }
  auto live = store.LiveReplicas(formation.name);
  const int hosts = static_cast<int>(store.SystemHosts(formation.id).size());
  placement::RolloutView view{ro->to_version,
                              placement::ResolveMaxParallel(ro->max_parallel, hosts), 0, true,
                              ro->stopping};
  auto step = placement::ReconcileSystemRollout(view, live);
  StopReplaced(store, step, ro->to_version, metrics);
  Record(store, *ro, step, hosts, formation, metrics);
  if (!step.replace.empty()) {
    spdlog::info("formation={} rollout={} version={} system replace={} updated={} healthy={}",
                 formation.name, ro->id, ro->to_version, step.replace.size(), step.updated,
                 step.healthy);
  }
  return true;
}

}  // namespace pgfleet::schedulerd
