// A formation's pass honours its max_running and its owners' quotas
// (placement::ApplyLimits on what FakeFleet says is in flight): it plans and
// assigns only what fits, gives the rest the limit's words, does not come
// back at once for a full batch held back, and asks nothing more of the
// store for a formation without limits.

#include <gtest/gtest.h>

#include <string>

#include "fake_fleet.h"
#include "formation_pass_fixture.h"

namespace pgfleet::schedulerd::testing_pass {
namespace {

TEST_F(FormationPassTest, AtMostMaxRunningOfTheFormationAreAssignedAndTheRestSayWhy) {
  fleet_.AddHost("h1", 100000, 100000);
  for (int64_t id = 1; id <= 6; ++id) fleet_.AddJob(id, 100, 64);
  fleet_.shape.max_running = 3;
  fleet_.s.live_before = 1;  // one already running
  auto r = Run(6);
  EXPECT_TRUE(r.assigned);
  EXPECT_FALSE(r.more_waiting) << "a batch held back by its limit waits for a job to end";
  EXPECT_EQ(2u, fleet_.s.assigned.size());
  EXPECT_EQ(1u, fleet_.s.assigned.count(1));
  EXPECT_EQ(1u, fleet_.s.assigned.count(2));
  ASSERT_EQ(1u, fleet_.reason_writes.size());
  EXPECT_EQ("waiting for max_running 3 of formation batch", fleet_.reason_writes[0].at(3));
  // Nothing more fits until one ends.
  EXPECT_FALSE(Run(6).assigned);
  fleet_.s.live_before = 0;
  fleet_.s.assigned.erase(1);
  EXPECT_TRUE(Run(6).assigned);
  EXPECT_EQ(3u, fleet_.s.assigned.size());
}

TEST_F(FormationPassTest, AnOwnerAtQuotaWaitsWithItsReasonAndOthersAreNotHeld) {
  fleet_.AddHost("h1", 100000, 100000);
  for (int64_t id = 1; id <= 4; ++id) fleet_.AddJob(id, 500, 64);
  for (auto& [id, p] : fleet_.s.pending) p.owner = id <= 3 ? "alice" : "bob";
  fleet_.shape.quotas = true;
  placement::OwnerQuota q;
  q.max_cpu = 2000;
  q.cpu = 1500;  // alice's other formations hold 1500m
  fleet_.s.quotas["alice"] = q;
  auto r = Run();
  EXPECT_TRUE(r.assigned);
  EXPECT_EQ(2u, fleet_.s.assigned.size());  // alice's first (2000 of 2000m) and bob's
  EXPECT_EQ(1u, fleet_.s.assigned.count(1));
  EXPECT_EQ(1u, fleet_.s.assigned.count(4));
  ASSERT_EQ(1u, fleet_.reason_writes.size());
  EXPECT_EQ("owner alice at quota: cpu 2000 of 2000m in use (this job asks 500m)",
            fleet_.reason_writes[0].at(2));
}

TEST_F(FormationPassTest, AFormationWithoutLimitsAsksTheStoreNothingMore) {
  fleet_.AddHost("h1", 100000, 100000);
  for (int64_t id = 1; id <= 3; ++id) fleet_.AddJob(id, 100, 64);
  Run();
  EXPECT_EQ(3u, fleet_.s.assigned.size());
  EXPECT_EQ(0, fleet_.limit_reads);
}

}  // namespace
}  // namespace pgfleet::schedulerd::testing_pass
