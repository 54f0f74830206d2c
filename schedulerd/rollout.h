#pragma once
// Rollouts inside the formation pass: a service or system formation whose
// template changed (a new version, pgfleet.rollouts) has its replicas
// replaced max_parallel at a time, each old one stopped only once a new one
// is healthy, with canaries waiting for promotion, and fails (reverting,
// with auto_revert) when it makes no progress within its deadline. The
// decision is the pure core's (placement::ReconcileRollout,
// ReconcileSystemRollout); this file reads the rollout and the replicas and
// writes the step back.
//
// What must hold: called only inside the formation's transaction, after
// PassStore::LockFormation succeeded, so two schedulers never run one step
// of a rollout twice; a scheduler that dies mid-pass rolls its step back and
// the next pass (its own or another's) takes it again from the database.

#include "core/metrics/metrics.h"
#include "schedulerd/pass_store.h"

namespace pgfleet::schedulerd {

// A service's rollout step. False when the formation has no rollout in
// progress (any more): the caller reconciles its replicas as usual.
bool RollOutService(PassStore& store, const store::Formation& formation, int replicas,
                    metrics::Registry& metrics);

// A system formation's: stops old replicas max_parallel at a time (the
// system reconcile that follows makes each host's new one). False when no
// rollout is in progress.
bool RollOutSystem(PassStore& store, const store::Formation& formation, metrics::Registry& metrics);

}  // namespace pgfleet::schedulerd
