// System formations in the pure core: ReconcileSystem (one replica per
// eligible host) and a replica pinned to its host in the plan.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/placement/placement.h"
#include "core/placement/reconcile.h"

namespace pgfleet::placement {
namespace {

using model::ReplicaState;

ReplicaView On(int64_t id, ReplicaState state, const std::string& host,
               const std::string& host_state = "up") {
  ReplicaView r;
  r.id = id;
  r.state = state;
  r.pinned_host = host;
  if (state != ReplicaState::kPending) r.host_id = host;
  r.host_state = state == ReplicaState::kPending ? "" : host_state;
  return r;
}

TEST(ReconcileSystem, OneReplicaOnEveryEligibleHost) {
  auto r = ReconcileSystem({"h1", "h2", "h3"}, {});
  EXPECT_EQ((std::vector<std::string>{"h1", "h2", "h3"}), r.create_on);
  EXPECT_TRUE(r.to_stop.empty());
  r = ReconcileSystem({"h1", "h2", "h3"}, {On(1, ReplicaState::kRunning, "h1"),
                                           On(2, ReplicaState::kPending, "h2")});
  EXPECT_EQ((std::vector<std::string>{"h3"}), r.create_on) << "a pending replica counts";
  EXPECT_TRUE(r.to_stop.empty());
}

TEST(ReconcileSystem, AHostThatLeavesLosesItsReplica) {
  auto r = ReconcileSystem({"h1", "h3"}, {On(1, ReplicaState::kRunning, "h1"),
                                          On(2, ReplicaState::kRunning, "h2", "draining"),
                                          On(3, ReplicaState::kPending, "h3"),
                                          On(4, ReplicaState::kPending, "h9")});
  EXPECT_TRUE(r.create_on.empty());
  EXPECT_EQ((std::vector<int64_t>{2, 4}), r.to_stop);
}

TEST(ReconcileSystem, ADuplicateOnAHostGoesKeepingTheOldestRunning) {
  auto r = ReconcileSystem({"h1"}, {On(5, ReplicaState::kPending, "h1"),
                                    On(7, ReplicaState::kRunning, "h1"),
                                    On(3, ReplicaState::kRunning, "h1")});
  EXPECT_TRUE(r.create_on.empty());
  EXPECT_EQ((std::vector<int64_t>{5, 7}), r.to_stop);
}

TEST(PinnedHost, APinnedJobGoesToItsHostOrWaitsForIt) {
  std::vector<HostView> hosts(2);
  hosts[0].id = "h1";
  hosts[1].id = "h2";
  for (auto& h : hosts) h.cpu_total = h.memory_total = 1000;
  JobRequest j;
  j.id = 1;
  j.cpu = 100;
  j.memory = 64;
  j.pinned_host = "h2";
  Plan p = PlanPlacements({j}, hosts);
  ASSERT_EQ(1u, p.placements.size());
  EXPECT_EQ("h2", p.placements[0].host_id) << "bin-packing alone would pick h1";
  EXPECT_FALSE(LabelsMatch(j, hosts[0]));
  j.pinned_host = "h3";
  p = PlanPlacements({j}, hosts);
  ASSERT_EQ(1u, p.unplaced.size());
  EXPECT_EQ("waiting for its host h3", p.unplaced[0].reason);
  EXPECT_FALSE(p.unplaced[0].never_fits);
}

}  // namespace
}  // namespace pgfleet::placement
