// A rollout inside a formation's pass (schedulerd/rollout.h) on an in-memory
// fleet (FakeFleet): the pass creates new-version replicas and replaces old
// ones in the same transaction, records the rollout's phase, ends it when
// done, fails it past its deadline, and rolls everything back when the pass
// does not commit.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "formation_pass_fixture.h"

namespace pgfleet::schedulerd::testing_pass {
namespace {

placement::ReplicaView Replica(int64_t id, int version, bool healthy) {
  placement::ReplicaView r;
  r.id = id;
  r.state = model::ReplicaState::kRunning;
  r.host_id = "h1";
  r.host_state = "up";
  r.version = version;
  r.healthy = healthy;
  return r;
}

class RolloutPassTest : public FormationPassTest {
 protected:
  void SetUp() override {
    fleet_.AddHost("h1", 10000, 10000);
    fleet_.shape = {true, 2, "web"};
    fleet_.shape.rolling_out = true;
    fleet_.version = 2;
    fleet_.s.replicas = {Replica(1, 1, true), Replica(2, 1, true)};
    store::ActiveRollout ro;
    ro.id = 5;
    ro.to_version = 2;
    ro.state = "running";
    ro.max_parallel = "1";
    ro.progress_deadline = "00:05:00";
    fleet_.s.rollout = ro;
  }
};

TEST_F(RolloutPassTest, TheFirstStepStartsOneNewReplicaAndStopsNone) {
  Run();
  EXPECT_TRUE(fleet_.s.stops.empty());
  ASSERT_EQ(3u, fleet_.s.replicas.size());
  EXPECT_EQ(2, fleet_.s.replicas.back().version);
  EXPECT_EQ(1u, fleet_.s.assigned.size()) << "placed in the same pass";
  EXPECT_EQ(std::vector<std::string>{"progress running"}, fleet_.s.rollout_writes);
}

TEST_F(RolloutPassTest, AHealthyNewReplicaReplacesAnOldOneSayingByWhichVersion) {
  fleet_.s.replicas.push_back(Replica(3, 2, true));
  Run();
  ASSERT_EQ(1u, fleet_.s.stops.size());
  EXPECT_EQ(std::vector<int64_t>{2}, fleet_.s.stops[0].first);
  EXPECT_EQ("replaced by version 2", fleet_.s.stops[0].second);
  EXPECT_EQ(3u, fleet_.s.replicas.size()) << "the stopped one still runs: none created";
}

TEST_F(RolloutPassTest, EveryReplicaOfTheVersionHealthyEndsTheRollout) {
  fleet_.s.replicas = {Replica(3, 2, true), Replica(4, 2, true)};
  Run();
  EXPECT_EQ(std::vector<std::string>{"finish"}, fleet_.s.rollout_writes);
  EXPECT_TRUE(fleet_.s.stops.empty());
}

TEST_F(RolloutPassTest, PastItsDeadlineItFailsAndTheServiceKeepsItsCount) {
  fleet_.s.rollout->past_deadline = true;
  fleet_.s.replicas = {Replica(1, 1, true), Replica(3, 2, false)};
  Run();
  ASSERT_EQ(1u, fleet_.s.rollout_writes.size());
  EXPECT_EQ("fail no new replica of version 2 became healthy within 00:05:00 (0 healthy)",
            fleet_.s.rollout_writes[0]);
  EXPECT_TRUE(fleet_.s.stops.empty()) << "neither version's replicas are stopped";
  EXPECT_EQ(2u, fleet_.s.replicas.size());
}

TEST_F(RolloutPassTest, AStepThatDoesNotCommitLeavesNothing) {
  fleet_.lock_busy = false;
  fleet_.fail_assign = true;
  EXPECT_ANY_THROW(Run());
  EXPECT_EQ(2u, fleet_.s.replicas.size());
  EXPECT_TRUE(fleet_.s.rollout_writes.empty());
}

}  // namespace
}  // namespace pgfleet::schedulerd::testing_pass
