#pragma once
// Preemption in the placement core: for a job that fits nowhere, the host
// where stopping the fewest, lowest-priority jobs makes room. Pure: plain
// structs in, plain structs out; the scheduler's formation pass calls it for
// a pending job the plan left unplaced, `pgfleet plan` to count "would need
// preemption" (README.md here, docs/preemption.md).
//
// What must hold (tests/unit/placement_preemption_test.cpp):
// - A victim is on the chosen host, preemptible, and of strictly lower
//   priority than `job` (so a victim placed again can never preempt its
//   preemptor: no loop).
// - No formation loses more than its budget (`may_lose`).
// - The job then fits the host: its labels, isolation, pinned host, bridge
//   and condition as for placement (LabelsMatch), its cpu and memory once
//   the victims' are freed, its ports as the host holds them now (a
//   victim's ports are not counted as freed: RunningJob does not carry them).
// - Fewest victims first; among as few, the lowest highest priority, then
//   the lowest total priority, then the lower host id, then the lower ids.
//   The same inputs in any order give the same answer.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/placement/placement.h"

namespace pgfleet::placement {

struct RunningJob {  // a job assigned or running on a host
  int64_t id = 0;
  std::string host_id;
  int cpu = 0;
  int memory = 0;
  int priority = 50;
  bool preemptible = false;
  std::string formation;
};

struct Preemption {
  std::string host_id;
  std::vector<int64_t> victims;  // ascending ids; empty: it fits there as it is
};

// At most this many candidates of one host are searched exactly (every
// subset, fewest first); a host with more keeps the lowest-priority ones,
// the largest first among equal priorities (the ones likeliest to make room
// with few victims).
inline constexpr int kMaxVictimCandidates = 12;

// may_lose: formation -> how many more of its live jobs may be stopped
// (live - min_available); a formation absent from it has no budget limit.
// The host where stopping the fewest, lowest-priority preemptible jobs of
// strictly lower priority makes `job` fit (feasibility otherwise as
// LabelsMatch/PickPorts); nullopt when none. A host where `job` fits as it is
// wins with no victims.
std::optional<Preemption> PickVictims(const JobRequest& job, const std::vector<HostView>& hosts,
                                      const std::vector<RunningJob>& running,
                                      const std::map<std::string, int>& may_lose);

}  // namespace pgfleet::placement
