#pragma once
// Explain, the placement core for one job host by host (`pgfleet plan`):
// where PlanPlacements would put it and, for every other host, the first
// filter of the scheduler's that turns it away, counted by kind. Pure, like
// placement.h: the pick is PlanPlacements' own, and each host's verdict is
// made of the predicates the plan uses (LabelsMatch's parts, the host's
// condition, Fits, PickPorts), so a host with no rejection is exactly one the
// plan could have chosen (tests/unit/placement_explain_test.cpp checks it).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/placement/placement.h"
#include "core/placement/preemption.h"

namespace pgfleet::placement {

// Why a host does not take a job, in the order the filters run: the first
// that applies is the host's.
enum class Rejection {
  kNone,             // it has room now: feasible
  kPinnedElsewhere,  // the job is pinned to another host
  kConstraint,       // a constraint key=value the host's labels lack (detail)
  kNotIsolating,     // process driver, the job unprivileged
  kNoBridge,         // a bridge job, the host offers no bridge
  kCondition,        // the host reports a condition (detail: up to its ':')
  kCpu,              // less cpu free than asked
  kMemory,           // less memory free than asked (cpu was enough)
  kPorts,            // cpu and memory free, not its ports
  kPreemption,       // lacks cpu or memory, room if lower-priority jobs stop (detail: how many)
  kRankedLower,      // feasible, another ranked first
  kNotUp,            // not in the snapshot: detail is why (draining, offline, ...)
};

struct HostRejection {
  Rejection kind = Rejection::kNone;
  std::string detail;  // kConstraint: "zone=b"; kCondition: "disk pressure"
};

// The first filter that turns `job` away from `host` as it is now.
HostRejection FirstRejection(const JobRequest& job, const HostView& host);

// Hosts turned away for one kind (and detail).
struct RejectionCount {
  Rejection kind = Rejection::kNone;
  std::string detail;
  int hosts = 0;
  // kCpu: the most millicores, kMemory: the most MiB, any of them has free.
  int64_t largest_free = 0;
};

struct Explanation {
  std::string host;                 // where it would go ("": nowhere now)
  std::map<std::string, int> ports;  // the ports it would get there
  // Why that host, in rank order: "spread: 0 of its formation's jobs on
  // zone=a", "warm: ran rootfs alpine", "bin-pack: fullest of 3 feasible
  // after placing (55%)".
  std::vector<std::string> rank;
  int feasible = 0;  // hosts with room now
  // The other hosts by kind, most hosts first (then kind, then detail).
  std::vector<RejectionCount> rejected;
  // When it goes nowhere: ExplainUnplaced's sentence, the scheduler's reason.
  std::string reason;
  bool never_fits = false;
};

// What PickVictims would choose from (preemption.h): the preemptible jobs
// of lower priority than the job's, and the formations' budgets.
struct PreemptionView {
  std::vector<RunningJob> candidates;
  std::map<std::string, int> may_lose;
};

// `hosts`: the snapshot the scheduler places on (up, admitted, heartbeating,
// not suspended); `running`: the job's formation's jobs per host (its spread).
// With `preemption`, a host that lacks cpu or memory where PickVictims (on
// that host alone) finds victims counts as kPreemption with their number:
// "1 would need preemption of 2 jobs".
Explanation ExplainJob(const JobRequest& job, const std::vector<HostView>& hosts,
                       const HostCounts& running = {},
                       const PreemptionView* preemption = nullptr);

// The kind's name as pgfleet.explain and `plan --json` give it:
// "constraint", "pinned_elsewhere", "not_isolating", "no_bridge",
// "condition", "cpu", "memory", "ports", "preemption", "ranked_lower",
// "not_up" ("" for kNone).
const char* KindName(Rejection kind);

// Adds `n` hosts not in the snapshot for `why` ("draining", "offline", ...).
void AddNotUp(Explanation* e, const std::string& why, int n);

// "3 filtered by constraint zone=b", "2 lacked memory (largest free 512 MiB)",
// "1 would need preemption of 2 jobs", "1 draining".
std::string CountText(const RejectionCount& c);

// The whole answer, two lines:
// "would place on host-2 (warm: ran rootfs alpine; bin-pack: ...)" or
// "would not place now: <reason>", then
// "not on 7 hosts: 3 filtered by constraint zone=b, 1 draining" (no second
// line when every host is the one picked).
std::string ExplanationText(const Explanation& e);

}  // namespace pgfleet::placement
