#pragma once
// The pure rollout step: a formation's live replicas, some of an older
// version, and the rollout in progress -> which new replicas to create and
// which old ones to stop now. No database, no clock: "healthy" comes in
// already judged (ReplicaView::healthy: running and healthy for the
// formation's min_healthy_time, by the database's clock).
//
// What must hold, for a service of `desired` replicas and max_parallel P:
// - at most desired + P replicas hold a place at once (live ones and those
//   being stopped that still run), so a rollout never needs more room than
//   P extra replicas;
// - an old replica is stopped only for a new one that is healthy, or when
//   it serves nothing (pending, assigned), so never fewer than desired - P
//   healthy replicas (as many as were healthy before, when all were);
// - at most P new replicas are on their way (live, not yet healthy) at once;
// - canaries: while not promoted, `canary` new replicas run beside every old
//   one, and no old one is stopped for them.
// The step is level-triggered: the same inputs give the same step, and a
// pass that runs it twice (two schedulers, a crash between) changes nothing
// the first did not.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/placement/reconcile.h"

namespace pgfleet::placement {

struct RolloutView {
  int version = 0;       // the version rolled out (formations.version)
  int max_parallel = 1;  // replicas replaced at a time, resolved (>= 1)
  int canary = 0;        // canaries to run before promotion (0: none)
  bool promoted = false;
  int stopping = 0;  // the formation's replicas being stopped that still run
};

enum class RolloutPhase { kCanary, kWaitingPromotion, kRunning, kDone };
// canary, waiting_promotion, running, succeeded: pgfleet.rollouts.state.
std::string_view ToString(RolloutPhase p);

struct RolloutStep {
  int to_create = 0;             // new replicas (of rollout.version)
  std::vector<int64_t> replace;  // old replicas to stop: replaced by the new version
  std::vector<int64_t> surplus;  // replicas to stop beyond `desired` (a scale-down)
  RolloutPhase phase = RolloutPhase::kRunning;
  int updated = 0;  // live replicas of the version, after this step's stops
  int healthy = 0;  // of them healthy
  int old = 0;      // live replicas of other versions, after this step's stops
};

// Resolves formations.max_parallel ("3" or "25%") against `of` replicas:
// a percentage rounds up; at least 1. Text it cannot read counts as 1.
int ResolveMaxParallel(std::string_view text, int of);

// One step of a service's rollout to rollout.version.
RolloutStep ReconcileRollout(int desired, const RolloutView& rollout,
                             const std::vector<ReplicaView>& live);

// One step of a system formation's: old replicas stopped P at a time, fewer
// while new ones are on their way or old ones still stop (the system
// reconcile makes each host's replacement). Canaries do not apply.
RolloutStep ReconcileSystemRollout(const RolloutView& rollout,
                                   const std::vector<ReplicaView>& live);

}  // namespace pgfleet::placement
