#pragma once
// One formation's pass: lock it, reconcile a service's replicas, claim its
// pending jobs, plan them on a snapshot of the hosts (pure core:
// placement::PlanPlacements), assign conditionally, record why the rest wait.
//
//   try_lock_formation -> [service: ReconcileReplicas] -> ReadPending
//     -> [max_running, owner quotas: HoldBack]
//     -> rounds of { LoadHostSnapshot -> rounds of { PlanPlacements -> LockHosts }
//                    -> AssignJobs }  (a first plan of a few jobs: no LockHosts)
//     -> [jobs left waiting that some host could run: Preemptor::Run]
//     -> commit -> assignments handed to the dispatcher
//     -> SetPendingReasons (those that changed, in a statement of its own)
//
// What must hold: the whole pass is one transaction holding
// pg_try_advisory_xact_lock(lock class, formation id): if this process dies
// mid-decision, PostgreSQL rolls it back and frees the lock at once. The
// claim reads without locking (the advisory lock keeps other schedulers off
// the formation); LockHosts locks the hosts a plan uses before AssignJobs
// locks the jobs it assigns, neither ever waiting (skip locked).
// Only assignments that committed reach *out. Called by the scheduler loop only.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/metrics/metrics.h"
#include "schedulerd/dispatch.h"
#include "schedulerd/pass_store.h"
#include "schedulerd/preemption.h"

namespace pgfleet::schedulerd {

struct FormationPassResult {
  bool locked = false;        // false: another scheduler holds the formation's lock, or it is gone
  bool more_waiting = false;  // a full batch was claimed and placed: come back at once
  bool assigned = false;      // it assigned at least one job
};

class FormationPass {
 public:
  // batch_size: pending jobs claimed per transaction. metrics must outlive this.
  FormationPass(int batch_size, metrics::Registry& metrics)
      : batch_size_(batch_size), metrics_(metrics), preemptor_(metrics) {}

  // Runs the pass of formation `formation_id` in its own transaction of
  // `store` (nothing when the formation is gone); adds what committed to *out.
  // pass_hosts: the hosts as the scheduler pass first saw them, shared by the
  // pass's formations in priority order and charged with what each assigns
  // (loaded by the first formation that needs it). Capacity freed while the
  // pass runs is left to the next pass, where the highest-priority formation
  // comes first again: a lower-priority formation later in the same pass
  // must not take it ahead of a higher one that just found none.
  FormationPassResult Work(PassStore& store, int formation_id, Targets* out,
                           std::optional<std::vector<store::SnapshotHost>>* pass_hosts);

 private:
  // Why a claimed job was left waiting (placement::Unplaced).
  struct Waiting {
    std::string reason;
    bool never_fits = false;  // no host of the snapshot could ever run it
  };
  struct Placed {
    Targets planned;                     // host id -> assigned jobs (api_url set)
    std::map<int64_t, Waiting> reasons;  // job id -> why it still waits
    size_t assigned = 0;
    std::vector<double> since_insert;    // first attempts: seconds from insert to assignment
  };
  // Plans `todo` on `hosts` and locks the hosts the plan uses
  // (PassStore::LockHosts), planning again with their allocations as locked, and
  // without those another transaction holds, until the plan uses only hosts
  // this transaction holds (*held); after model::kHoldRounds, jobs still
  // planned elsewhere wait for the next pass. Two schedulers with the same
  // snapshot then place on different hosts (docs/decisions/0013).
  // requests: every job of todo by id.
  // spread: where the formation's jobs are, for a spread formation.
  placement::Plan PlanOnHeldHosts(PassStore& store, const std::vector<placement::JobRequest>& todo,
                                  const std::map<int64_t, const placement::JobRequest*>& requests,
                                  std::vector<placement::HostView> hosts,
                                  const placement::HostCounts& spread, std::set<std::string>* held);
  // Rounds of: plan on held hosts (PlanOnHeldHosts), assign (which can still
  // leave out a job another transaction holds or cancelled); jobs left out
  // are planned again against fresh state.
  // spread: as for PlanOnHeldHosts; charged with each assignment.
  Placed Place(PassStore& store, const std::vector<store::PendingJob>& claimed,
               std::optional<std::vector<store::SnapshotHost>>* pass_hosts,
               placement::HostCounts spread);

  // Splits `claimed` by the formation's max_running and its owners' quotas
  // (placement::ApplyLimits, on what PassStore::FormationLive and
  // OwnerQuotas read now): *within may be planned, *held_back waits with the
  // limit's words. assign_jobs enforces the same limits; this keeps a
  // formation at its limit from planning and assigning in vain every pass.
  void HoldBack(PassStore& store, const store::FormationShape& shape,
                const std::vector<store::PendingJob>& claimed,
                std::vector<store::PendingJob>* within, std::map<int64_t, Waiting>* held_back);

  // Why the claimed jobs left waiting wait (jobs.error, for `pgfleet ps`),
  // written after the pass commits: inside it, it kept the hosts' rows that
  // assign_jobs locks from other passes and from reports for as long as it
  // took. Only reasons that changed since the claim read them: with a full
  // fleet every pass finds the same ones. Behind the first model::kReasonHead
  // jobs, a job that only waits its turn and has no reason yet gets none.
  // A failure is logged, not thrown (but a broken connection is).
  void WriteReasons(PassStore& store, const std::vector<store::PendingJob>& claimed,
                    const std::map<int64_t, Waiting>& reasons);
  // Jobs of `claimed` left waiting (in *reasons) that some host could run:
  // Preemptor::Run on the pass's view of the hosts; *reasons takes the
  // reasons of those that preempted or wait for their victims.
  void Preempt(PassStore& store, int formation_id, const std::vector<store::PendingJob>& claimed,
               const std::optional<std::vector<store::SnapshotHost>>& pass_hosts,
               std::map<int64_t, Waiting>* reasons);

  int batch_size_;
  metrics::Registry& metrics_;
  store::HostConfigs host_configs_;  // kept across passes (PassStore::LoadHostSnapshot)
  Preemptor preemptor_;              // for jobs that fit nowhere (preemption.h)
};

}  // namespace pgfleet::schedulerd
