// A cron formation's pass (schedulerd/formation_pass.h) on an in-memory
// fleet (FakeFleet): once its due time has come, the pass ticks it under the
// formation's lock and places the jobs the tick made in the same
// transaction; not due, or locked by another scheduler, it does not tick; a
// pass that fails leaves no tick behind.

#include <gtest/gtest.h>

#include "formation_pass_fixture.h"

namespace pgfleet::schedulerd::testing_pass {
namespace {

store::FormationShape Cron(bool due) {
  store::FormationShape shape;
  shape.name = "nightly";
  shape.is_cron = true;
  shape.cron_due = due;
  return shape;
}

TEST_F(FormationPassTest, ADueCronFormationTicksAndItsJobIsPlacedInTheSamePass) {
  fleet_.shape = Cron(true);
  fleet_.AddHost("h1", 1000, 1000);
  auto r = Run();
  EXPECT_EQ(1, fleet_.cron_ticks);
  EXPECT_EQ(1u, fleet_.s.assigned.size()) << "the tick's job is placed by the pass that made it";
  EXPECT_EQ(1u, Dispatched());
  EXPECT_TRUE(r.assigned);
  EXPECT_EQ(1, fleet_.commits);
}

TEST_F(FormationPassTest, ACronFormationNotDueDoesNotTickButItsPendingJobsArePlaced) {
  fleet_.shape = Cron(false);
  fleet_.AddHost("h1", 1000, 1000);
  fleet_.AddJob(1, 100, 64);  // an earlier tick's job that found no room then
  Run();
  EXPECT_EQ(0, fleet_.cron_ticks);
  EXPECT_EQ(1u, fleet_.s.assigned.size());
}

TEST_F(FormationPassTest, ACronFormationLockedByAnotherSchedulerIsNotTicked) {
  fleet_.shape = Cron(true);
  fleet_.lock_busy = true;
  fleet_.AddHost("h1", 1000, 1000);
  Run();
  EXPECT_EQ(0, fleet_.cron_ticks);
  EXPECT_TRUE(fleet_.s.pending.empty());
}

TEST_F(FormationPassTest, ACronPassThatFailsLeavesNoTickBehind) {
  fleet_.shape = Cron(true);
  fleet_.cron_jobs_per_tick = 3;  // a catch-up of three due times (overlap allow)
  fleet_.AddHost("h1", 1000, 1000);
  fleet_.fail_assign = true;
  EXPECT_ANY_THROW(Run());
  EXPECT_TRUE(fleet_.s.pending.empty()) << "the tick's jobs are rolled back with the pass";
  EXPECT_EQ(0, fleet_.commits);
  fleet_.fail_assign = false;
  Run();
  EXPECT_EQ(3u, fleet_.s.assigned.size());
}

}  // namespace
}  // namespace pgfleet::schedulerd::testing_pass
