// Placement's feasibility (core/placement/README.md): which hosts a job may go
// to at all. Labels match its constraints, the host has room, isolates jobs
// unless the job is privileged, and is under no condition.

#include <gtest/gtest.h>

#include <string>

#include "core/placement/placement.h"
#include "placement_inputs.h"

namespace pgfleet::placement::testing_placement {
namespace {

TEST(LabelsMatch, RequiresEveryConstraintPresentWithEqualValue) {
  const HostView host = Host("h1", 1000, 1000, {{"zone", "a"}, {"disk", "ssd"}});
  EXPECT_TRUE(LabelsMatch(Job(1, 1, 1), host));
  EXPECT_TRUE(LabelsMatch(Job(1, 1, 1, 50, {{"zone", "a"}}), host));
  EXPECT_TRUE(LabelsMatch(Job(1, 1, 1, 50, {{"zone", "a"}, {"disk", "ssd"}}), host));
  EXPECT_FALSE(LabelsMatch(Job(1, 1, 1, 50, {{"zone", "b"}}), host));
  EXPECT_FALSE(LabelsMatch(Job(1, 1, 1, 50, {{"zone", "a"}, {"gpu", "yes"}}), host));
  EXPECT_FALSE(LabelsMatch(Job(1, 1, 1, 50, {{"zone", ""}}), host));
}

TEST(Placement, AnUnprivilegedJobGoesOnlyToHostsThatIsolateJobs) {
  HostView process = Host("a-process", 8000, 8000);
  process.isolates = false;
  HostView container = Host("b-container", 1000, 1000);
  JobRequest unprivileged = Job(1, 100, 64);
  JobRequest privileged = Job(2, 100, 64);
  privileged.privileged = true;
  EXPECT_FALSE(LabelsMatch(unprivileged, process));
  EXPECT_TRUE(LabelsMatch(unprivileged, container));
  EXPECT_TRUE(LabelsMatch(privileged, process));
  // The process host is emptier, so bin-packing alone would not pick it for
  // job 2 either; job 1 must not go there whatever the packing says.
  auto where = Where(PlanPlacements({unprivileged, privileged}, {process, container}));
  EXPECT_EQ("b-container", where[1]);
  EXPECT_EQ(1u, where.count(2));

  // With only process hosts, the unprivileged job waits and says why.
  Plan only = PlanPlacements({unprivileged, privileged}, {process});
  ASSERT_EQ(1u, only.unplaced.size());
  EXPECT_EQ(1, only.unplaced[0].job_id);
  EXPECT_TRUE(only.unplaced[0].never_fits);
  EXPECT_NE(std::string::npos, only.unplaced[0].reason.find("no host isolates jobs"))
      << only.unplaced[0].reason;
  ASSERT_EQ(1u, only.placements.size());
  EXPECT_EQ(2, only.placements[0].job_id);
}

TEST(Placement, AHostUnderAConditionGetsNoNewJobsAndTheReasonNamesIt) {
  // The held host is fuller, so bin-packing alone would pick it.
  HostView held = Used(Host("a-held", 1000, 1000), 500, 500);
  held.condition = "disk pressure: /data is 97% full (limit 95%)";
  const HostView free = Host("b-free", 1000, 1000);
  auto where = Where(PlanPlacements({Job(1, 100, 64)}, {held, free}));
  EXPECT_EQ("b-free", where[1]);

  // Only the held host: the job waits (it may run once the host recovers),
  // and says which host and why.
  Plan only = PlanPlacements({Job(1, 100, 64)}, {held});
  ASSERT_EQ(1u, only.unplaced.size());
  EXPECT_TRUE(only.placements.empty());
  EXPECT_FALSE(only.unplaced[0].never_fits);
  EXPECT_EQ(
      "waiting for hosts to recover: host a-held has disk pressure: /data is 97% full (limit 95%)",
      only.unplaced[0].reason);

  // A job too big for every host says so, condition or not.
  Plan big = PlanPlacements({Job(2, 5000, 64)}, {held});
  ASSERT_EQ(1u, big.unplaced.size());
  EXPECT_TRUE(big.unplaced[0].never_fits);
  EXPECT_NE(std::string::npos, big.unplaced[0].reason.find("no host has 5000m cpu"))
      << big.unplaced[0].reason;
}

TEST(Fits, NeedsFreeCpuAndFreeMemoryIncludingAnExactFit) {
  const HostView host = Used(Host("h1", 1000, 2000), 400, 500);
  EXPECT_TRUE(Fits(Job(1, 600, 1500), host));
  EXPECT_FALSE(Fits(Job(1, 601, 1500), host));
  EXPECT_FALSE(Fits(Job(1, 600, 1501), host));
}

TEST(Placement, NeverPicksHostWithoutRoom) {
  // The fuller host would win the bin-pack rank if it had room; it does not.
  const Plan plan = PlanPlacements(
      {Job(1, 500, 100)}, {Used(Host("full", 1000, 1000), 600, 900), Host("empty", 1000, 1000)});
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].host_id, "empty");
  EXPECT_TRUE(plan.unplaced.empty());
}

TEST(Placement, NeverPicksHostWithUnmatchedLabels) {
  const Plan plan = PlanPlacements({Job(1, 100, 100, 50, {{"zone", "b"}})},
                                   {Used(Host("a-full", 1000, 1000, {{"zone", "a"}}), 800, 800),
                                    Host("b-empty", 1000, 1000, {{"zone", "b"}})});
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].host_id, "b-empty");
}

TEST(Placement, HostWithNoAdvertisedCapacityGetsNothing) {
  // A nonsense snapshot (negative allocation) must not make a zero-size host look free.
  const Plan plan = PlanPlacements({Job(1, 100, 100)}, {Used(Host("zero", 0, 0), -500, -500)});
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.unplaced.size(), 1u);
  EXPECT_TRUE(plan.unplaced[0].never_fits);
}

}  // namespace
}  // namespace pgfleet::placement::testing_placement
