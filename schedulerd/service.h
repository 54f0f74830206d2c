#pragma once
// Service formations inside the formation pass: creates missing replicas and
// stops surplus ones or ones to move off draining/offline hosts. The decision
// is the pure core's (placement::ReconcileService); this file reads the live
// replicas and writes the decision back.
//
// What must hold: called only inside the formation's transaction, after
// PassStore::LockFormation succeeded, so two schedulers never reconcile the
// same service at once. Replicas it creates are pending rows the same pass
// then claims and places.

#include "core/metrics/metrics.h"
#include "schedulerd/pass_store.h"

namespace pgfleet::schedulerd {

void ReconcileReplicas(PassStore& store, const store::Formation& formation, int replicas,
                       metrics::Registry& metrics);

// A system formation (placement::ReconcileSystem): a replica pinned to each
// eligible host that has none; replicas on hosts that left stopped, saying
// which host and why. Same rule as ReconcileReplicas: inside the
// formation's transaction, holding its lock.
void ReconcileSystemReplicas(PassStore& store, const store::Formation& formation,
                             metrics::Registry& metrics);

// A sysbatch formation (placement::ReconcileSysbatch): a job pinned to each
// eligible host that never had one, unless `done`; a job that has not run
// and whose host was removed is cancelled, saying so. Same rule: inside the
// formation's transaction, holding its lock.
void ReconcileSysbatchJobs(PassStore& store, const store::Formation& formation, bool done,
                           metrics::Registry& metrics);

}  // namespace pgfleet::schedulerd
