#pragma once
// What `pgfleet plan` reads to run the placement core (core/placement/explain.h)
// as a scheduler's pass would: a job's request (pgfleet.placement_request)
// and the hosts of a pass's snapshot with, for the others, why they are not
// in it (pgfleet.placement_hosts). A library function, so the integration
// tests compare the core's answer on these with pgfleet.explain's.

#include <cstdint>
#include <map>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "core/placement/placement.h"
#include "core/placement/explain.h"

namespace pgfleet::cli {

struct Planned {
  placement::JobRequest request;
  std::string formation;
  std::string state;   // jobs.state
  std::string reason;  // jobs.error: why the scheduler left it pending ("" if never said)
};
// The job as pgfleet.placement_request returns it (the caller's own, or any
// for those who see every job); throws what it raises for another's.
Planned ReadPlacementRequest(pqxx::transaction_base& tx, int64_t id);

struct Fleet {
  std::vector<placement::HostView> hosts;  // those a pass would place on
  placement::HostCounts running;           // the formation's live jobs per host (its spread)
  std::map<std::string, int> not_up;       // the others, by why: draining, offline, ...
  // What a scheduler could preempt for the job (pgfleet.preemption_candidates,
  // ids replaced by their order) and the formations' budgets.
  placement::PreemptionView preemption;
};
// Each host is warm only for the request's own rootfs: all plan learns of them.
Fleet ReadPlacementHosts(pqxx::transaction_base& tx, const Planned& p);

}  // namespace pgfleet::cli
