// A service formation's pass (schedulerd/formation_pass.h) on an in-memory
// fleet (FakeFleet): its missing replicas are created and placed in the same
// pass, its surplus is stopped saying why, replicas moved off a leaving host
// say which, and a spread formation spreads from where its jobs are.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/model/constants.h"
#include "formation_pass_fixture.h"

namespace pgfleet::schedulerd::testing_pass {
namespace {

TEST_F(FormationPassTest, AServiceGetsItsMissingReplicasPlacedInTheSamePass) {
  fleet_.shape = {true, 3, "web"};
  fleet_.AddHost("h1", 10000, 10000);
  auto r = Run();
  EXPECT_TRUE(r.assigned);
  EXPECT_EQ(3u, fleet_.s.assigned.size());
  EXPECT_TRUE(fleet_.s.stops.empty());
}

TEST_F(FormationPassTest, AServiceScaledDownStopsItsSurplusSayingWhy) {
  fleet_.shape = {true, 1, "web"};
  fleet_.s.replicas = {{1, model::ReplicaState::kRunning, false},
                       {2, model::ReplicaState::kRunning, false}};
  Run();
  ASSERT_EQ(1u, fleet_.s.stops.size());
  EXPECT_EQ(std::vector<int64_t>{2}, fleet_.s.stops[0].first);
  EXPECT_EQ("service web scaled to 1 replica", fleet_.s.stops[0].second);
}

TEST_F(FormationPassTest, AReplicaMovedOffALeavingHostSaysWhichHost) {
  fleet_.shape = {true, 2, "web"};
  fleet_.AddHost("h2", 10000, 10000);
  // Replica 1 is on a draining host; its replacement (3) already runs, healthy.
  fleet_.s.replicas = {{1, model::ReplicaState::kRunning, true, "h1", "draining"},
                       {2, model::ReplicaState::kRunning, false, "h2", "up", "", 0, true},
                       {3, model::ReplicaState::kRunning, false, "h2", "up", "", 0, true}};
  Run();
  ASSERT_EQ(1u, fleet_.s.stops.size());
  EXPECT_EQ(std::vector<int64_t>{1}, fleet_.s.stops[0].first);
  EXPECT_EQ("moved off draining host h1", fleet_.s.stops[0].second);
}

TEST_F(FormationPassTest, AReplicaOnALeavingHostStaysUntilItsReplacementRuns) {
  fleet_.shape = {true, 2, "web"};
  fleet_.AddHost("h2", 10000, 10000);
  fleet_.s.replicas = {{1, model::ReplicaState::kRunning, true, "h1", "offline"},
                       {2, model::ReplicaState::kRunning, false, "h2", "up"}};
  Run();
  EXPECT_TRUE(fleet_.s.stops.empty());
  EXPECT_EQ(1u, fleet_.s.assigned.size()) << "its replacement is placed";
}

TEST_F(FormationPassTest, ASpreadServiceSpreadsFromWhereItsReplicasAre) {
  fleet_.shape = {true, 3, "web", "host"};
  fleet_.AddHost("h1", 10000, 10000);
  fleet_.AddHost("h2", 10000, 10000);
  fleet_.AddHost("h3", 10000, 10000);
  Run();
  EXPECT_EQ(1, fleet_.host_count_reads);
  std::map<std::string, int> per_host;
  for (const auto& [job, host] : fleet_.s.assigned) ++per_host[host];
  EXPECT_EQ((std::map<std::string, int>{{"h1", 1}, {"h2", 1}, {"h3", 1}}), per_host);
}

TEST_F(FormationPassTest, APackedFormationReadsNoHostCounts) {
  fleet_.shape = {true, 3, "web"};
  fleet_.AddHost("h1", 10000, 10000);
  fleet_.AddHost("h2", 10000, 10000);
  Run();
  EXPECT_EQ(0, fleet_.host_count_reads);
  for (const auto& [job, host] : fleet_.s.assigned) EXPECT_EQ("h1", host);
}

}  // namespace
}  // namespace pgfleet::schedulerd::testing_pass
