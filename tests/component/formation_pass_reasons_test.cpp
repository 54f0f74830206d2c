// Which reasons a formation's pass (schedulerd/formation_pass.h) writes for
// the jobs it leaves pending, on an in-memory fleet (FakeFleet): a capacity
// reason for jobs planned on hosts held elsewhere, only reasons that changed
// and only for the head of the queue, "never fits" wherever the job waits,
// written after the commit, and a failed write keeps the assignments.

#include <gtest/gtest.h>

#include <string>

#include "core/model/constants.h"
#include "formation_pass_fixture.h"

namespace pgfleet::schedulerd::testing_pass {
namespace {

TEST_F(FormationPassTest, JobsStillPlannedOnHostsHeldElsewhereWaitWithACapacityReason) {
  fleet_.AddHost("a", 10000, 100000);
  fleet_.s.hosts["a"].held_elsewhere = true;
  const int n = model::kPlanWithoutLocksUpTo + 1;
  for (int i = 1; i <= n; ++i) fleet_.AddJob(i, 100, 64);
  auto r = Run();
  EXPECT_TRUE(r.locked);
  EXPECT_FALSE(r.assigned);
  EXPECT_TRUE(fleet_.s.assigned.empty());
  ASSERT_EQ(1u, fleet_.reason_writes.size());
  EXPECT_EQ(static_cast<size_t>(n), fleet_.reason_writes[0].size());
  EXPECT_EQ("waiting for capacity: needs 100m cpu, 64 MiB memory", fleet_.reason_writes[0].at(1));
}

TEST_F(FormationPassTest, OnlyReasonsThatChangedAreWrittenAndNotForTheQueueBehindItsHead) {
  fleet_.AddHost("h1", 50, 1000);  // room for none of them now, for all of them empty
  const int n = model::kReasonHead + 10;
  for (int i = 1; i <= n; ++i) fleet_.AddJob(i, 100, 64);
  fleet_.s.hosts["h1"].view.cpu_total = 1000;
  fleet_.s.hosts["h1"].view.cpu_allocated = 1000;  // full now
  const std::string capacity = "waiting for capacity: needs 100m cpu, 64 MiB memory";
  fleet_.s.pending[1].reason = capacity;                    // unchanged: not written
  fleet_.s.pending[n].reason = "no host matches constraints";  // behind the head, but said before
  Run();
  ASSERT_EQ(1u, fleet_.reason_writes.size());
  const auto& w = fleet_.reason_writes[0];
  EXPECT_EQ(0u, w.count(1)) << "its reason did not change";
  EXPECT_EQ(1u, w.count(2));
  EXPECT_EQ(1u, w.count(model::kReasonHead));
  EXPECT_EQ(0u, w.count(model::kReasonHead + 1)) << "behind the head, only waits its turn";
  EXPECT_EQ(1u, w.count(n)) << "its old reason is wrong now";
  EXPECT_EQ(capacity, w.at(n));
}

TEST_F(FormationPassTest, AJobThatCanNeverFitIsToldSoWhereverItIsInTheQueue) {
  fleet_.AddHost("h1", 1000, 1000);
  const int n = model::kReasonHead + 5;
  for (int i = 1; i < n; ++i) fleet_.AddJob(i, 1000, 64);  // the host has room for one
  fleet_.AddJob(n, 1000, 999999);                          // never fits
  Run();
  ASSERT_EQ(1u, fleet_.reason_writes.size());
  ASSERT_EQ(1u, fleet_.reason_writes[0].count(n));
  EXPECT_NE(std::string::npos, fleet_.reason_writes[0].at(n).find("no host has 999999 MiB memory"))
      << fleet_.reason_writes[0].at(n);
}

TEST_F(FormationPassTest, AFailedReasonWriteKeepsTheCommittedAssignments) {
  fleet_.AddHost("h1", 100, 1000);
  fleet_.AddJob(1, 100, 64);
  fleet_.AddJob(2, 100, 64);  // no room left: would get a reason
  fleet_.fail_reasons = true;
  auto r = Run();
  EXPECT_TRUE(r.assigned);
  EXPECT_EQ(1u, Dispatched());
  EXPECT_EQ(1, metrics_.Get("pgfleet_scheduler_errors_total"));
}

}  // namespace
}  // namespace pgfleet::schedulerd::testing_pass
