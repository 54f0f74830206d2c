#pragma once
// The pure reconcilers: a service's desired replicas vs the replicas that
// exist -> how many to create and which to stop; a system formation's and a
// sysbatch formation's eligible hosts vs their jobs -> where to create one
// and which to stop. No database, no clock.
//
// A replica is "live" while it is pending, assigned or running with
// desired_state 'run'. Replicas on a draining or offline host are replaced
// first and stopped only once their replacements run (start elsewhere first,
// then stop), so a drain never lowers a service below its replica count.

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/states.h"

namespace pgfleet::placement {

struct ReplicaView {
  int64_t id = 0;
  model::ReplicaState state = model::ReplicaState::kPending;
  bool on_leaving_host = false;  // its host is draining or offline
  std::string host_id;           // "" while pending
  std::string host_state;        // its host's state ("" while pending)
  std::string pinned_host;       // a system formation's replica: its host
  int version = 0;               // the formation version it was made from (0: none)
  bool healthy = false;          // running and healthy for the formation's min_healthy_time
  bool unhealthy = false;        // its health check fails
};

struct ReconcileResult {
  int to_create = 0;             // new replicas (new job rows from the template)
  std::vector<int64_t> to_stop;  // replicas to stop, in the order to stop them
};

// A replica on a leaving host is stopped only once a replacement is healthy
// (ReplicaView::healthy), not merely running.
// Scale-down stops the least useful surplus first: pending, then assigned,
// then running, newest (highest id) first within each, keeping the oldest,
// proven replicas. `desired` < 0 is treated as 0.
ReconcileResult ReconcileService(int desired, const std::vector<ReplicaView>& live);

struct SystemReconcile {
  std::vector<std::string> create_on;  // eligible hosts without a live replica
  std::vector<int64_t> to_stop;        // replicas on hosts no longer eligible, and duplicates
};

// A system formation: one live replica on every host of `eligible` (host
// ids). A replica counts for the host it is pinned to (or runs on). A host
// that has more than one keeps its oldest running one (else its oldest);
// a replica whose host left `eligible` (draining, offline, lost, removed,
// labels changed) is stopped.
SystemReconcile ReconcileSystem(const std::vector<std::string>& eligible,
                                const std::vector<ReplicaView>& live);

// One job of a sysbatch formation, in any state (pending, assigned, running,
// succeeded, failed, cancelled), as its pass reads it.
struct SysbatchJobView {
  int64_t id = 0;
  std::string host;          // the host it is pinned to
  bool pending = false;      // pending with desired_state 'run': it has not run yet
  bool host_exists = false;  // its host still has a row (not removed)
};

struct SysbatchReconcile {
  std::vector<std::string> create_on;  // eligible hosts that never had a job of it
  std::vector<int64_t> to_cancel;      // pending jobs whose host was removed
};

// A sysbatch formation: one job per (formation, host) for the formation's
// life. Every host of `eligible` (host ids) that has no job in `jobs`, in
// whatever state, gets one, unless the formation is `done`; a host that
// already had one never gets a second (its retries are that job's
// attempts). A job that has not run waits for its host while the host exists
// (draining, offline, lost: placement says "waiting for its host h3") and is
// cancelled once the host is removed, done or not. Both lists are sorted.
SysbatchReconcile ReconcileSysbatch(const std::vector<std::string>& eligible,
                                    const std::vector<SysbatchJobView>& jobs, bool done);

}  // namespace pgfleet::placement
