#pragma once
// Preemption in a formation's pass (docs/preemption.md): for the claimed jobs
// the plan left waiting although some host could run them, stop
// lower-priority jobs on one host to make room (placement::PickVictims
// chooses, pgfleet.preempt checks again under row locks and stops them).
//
//   waiting jobs (priority order) -> WaitingForVictims (still stopping: wait)
//     -> ReadPreemptionInputs -> rounds of { PickVictims -> Preempt }
//
// What must hold:
// - It costs nothing when the pass placed every job, or when every job left
//   waiting can never fit: no statement is run.
// - A job whose earlier victims are still stopping preempts no more (the
//   room they free is its, as the placement order is priority first).
// - On a fleet where nothing can be preempted, a formation looks at most once
//   per kLookAgainAfter (one read of the candidates), not once per pass,
//   unless a job of higher priority than the last look's waits.
// - Each preemption is charged to the pass's view of the hosts before the
//   next job's choice, so one pass never counts the same room twice.
// Called by FormationPass::Work only, inside the pass's transaction.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/metrics/metrics.h"
#include "core/placement/preemption.h"
#include "schedulerd/pass_store.h"

namespace pgfleet::schedulerd {

class Preemptor {
 public:
  using Clock = std::chrono::steady_clock;
  // How long a formation whose look found nothing to preempt waits before
  // the next look.
  static constexpr std::chrono::seconds kLookAgainAfter{5};
  // The jobs looked at per pass, and preempted for per pass, at most.
  static constexpr size_t kMaxLooks = 8;
  static constexpr int kMaxPreemptions = 4;

  explicit Preemptor(metrics::Registry& metrics) : metrics_(metrics) {}

  // waiting: claimed jobs of formation `formation_id` left unplaced that
  // some host could run (not never_fits), in priority order, with the
  // reason each has now (jobs.error). hosts: the pass's view of the hosts.
  // Returns job id -> the reason it waits with now, for those that
  // preempted or wait for earlier victims.
  std::map<int64_t, std::string> Run(
      PassStore& store, int formation_id,
      const std::vector<std::pair<placement::JobRequest, std::string>>& waiting,
      std::vector<placement::HostView> hosts, Clock::time_point now);

 private:
  metrics::Registry& metrics_;
  // formation -> no look before this, unless a job of higher priority than
  // this waits
  std::map<int, std::pair<Clock::time_point, int>> quiet_until_;
};

// The reason of a job waiting for its victims (pgfleet.preempt writes the same).
std::string WaitingForVictimsReason(const std::string& host, const std::vector<int64_t>& victims);

}  // namespace pgfleet::schedulerd
