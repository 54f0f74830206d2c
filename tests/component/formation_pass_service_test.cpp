// A service formation's pass (schedulerd/formation_pass.h) on an in-memory
// fleet (FakeFleet): its missing replicas are created and placed in the same
// pass, and its surplus is stopped saying why.

#include <gtest/gtest.h>

#include <cstdint>
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
  EXPECT_EQ("service web scaled to 1 replicas", fleet_.s.stops[0].second);
}

}  // namespace
}  // namespace pgfleet::schedulerd::testing_pass
