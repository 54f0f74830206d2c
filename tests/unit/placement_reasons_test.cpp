// Why a job was not placed, in the words an operator reads: no host up,
// constraints no host matches, a size beyond the largest host, or waiting
// for capacity; and whether it can never fit.

#include <gtest/gtest.h>

#include <vector>

#include "core/placement/placement.h"
#include "placement_inputs.h"

namespace pgfleet::placement::testing_placement {
namespace {

TEST(Reasons, NoHostsReason) {
  const Plan plan = PlanPlacements({Job(1, 100, 64)}, {});
  ASSERT_EQ(plan.unplaced.size(), 1u);
  EXPECT_EQ(plan.unplaced[0].job_id, 1);
  EXPECT_EQ(plan.unplaced[0].reason, "no host is up");
  EXPECT_TRUE(plan.unplaced[0].never_fits);
}

TEST(Reasons, ReasonForUnmatchedConstraints) {
  const Plan plan = PlanPlacements({Job(1, 100, 64, 50, {{"zone", "b"}, {"disk", "ssd"}})},
                                   {Host("h1", 1000, 1000, {{"zone", "b"}}),
                                    Host("h2", 1000, 1000, {{"disk", "ssd"}, {"zone", "a"}})});
  ASSERT_EQ(plan.unplaced.size(), 1u);
  EXPECT_EQ(plan.unplaced[0].reason, "no host matches constraints disk=ssd,zone=b");
  EXPECT_TRUE(plan.unplaced[0].never_fits);
}

TEST(Reasons, ReasonNamesLargestHostMemory) {
  // The 64000 MiB host does not match the constraint, so it is not "largest".
  const Plan plan = PlanPlacements(
      {Job(1, 100, 100000, 50, {{"zone", "a"}})},
      {Host("h1", 4000, 7980, {{"zone", "a"}}), Host("h2", 4000, 4096, {{"zone", "a"}}),
       Host("h3", 4000, 64000, {{"zone", "b"}})});
  ASSERT_EQ(plan.unplaced.size(), 1u);
  EXPECT_EQ(plan.unplaced[0].reason, "no host has 100000 MiB memory; largest has 7980");
  EXPECT_TRUE(plan.unplaced[0].never_fits);
}

TEST(Reasons, ReasonNamesLargestHostCpu) {
  const Plan plan =
      PlanPlacements({Job(1, 64000, 100)}, {Host("h1", 4000, 8000), Host("h2", 2000, 8000)});
  ASSERT_EQ(plan.unplaced.size(), 1u);
  EXPECT_EQ(plan.unplaced[0].reason, "no host has 64000m cpu; largest has 4000m");
  EXPECT_TRUE(plan.unplaced[0].never_fits);
}

TEST(Reasons, ReasonNamesBothWhenCpuAndMemoryAreTooBig) {
  const Plan plan = PlanPlacements({Job(1, 64000, 100000)}, {Host("h1", 4000, 7980)});
  ASSERT_EQ(plan.unplaced.size(), 1u);
  EXPECT_EQ(plan.unplaced[0].reason,
            "no host has 64000m cpu; largest has 4000m; "
            "no host has 100000 MiB memory; largest has 7980");
}

TEST(Reasons, ReasonWhenCpuAndMemoryAreOnlyOnDifferentHosts) {
  const Plan plan =
      PlanPlacements({Job(1, 3000, 6000)}, {Host("cpu", 4000, 1000), Host("mem", 1000, 8000)});
  ASSERT_EQ(plan.unplaced.size(), 1u);
  EXPECT_EQ(plan.unplaced[0].reason, "no host has both 3000m cpu and 6000 MiB memory");
  EXPECT_TRUE(plan.unplaced[0].never_fits);
}

TEST(Reasons, WaitingForCapacityWhenAnEmptyHostWouldFit) {
  const Plan plan = PlanPlacements({Job(1, 500, 64)}, {Used(Host("h1", 1000, 1000), 600, 0)});
  ASSERT_EQ(plan.unplaced.size(), 1u);
  EXPECT_EQ(plan.unplaced[0].reason, "waiting for capacity: needs 500m cpu, 64 MiB memory");
  EXPECT_FALSE(plan.unplaced[0].never_fits);
}

TEST(Reasons, NonPositiveRequestIsNeverPlaced) {
  const Plan plan = PlanPlacements({Job(1, 0, 64), Job(2, 100, -1)}, {Host("h1", 1000, 1000)});
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.unplaced.size(), 2u);
  EXPECT_EQ(plan.unplaced[0].reason, "cpu must be > 0 (got 0)");
  EXPECT_EQ(plan.unplaced[1].reason, "memory must be > 0 (got -1)");
  EXPECT_TRUE(plan.unplaced[0].never_fits);
  EXPECT_TRUE(plan.unplaced[1].never_fits);
}

TEST(Reasons, ExplainUnplacedGivesThePlansReason) {
  const std::vector<HostView> hosts = {Used(Host("h1", 1000, 1000, {{"zone", "a"}}), 900, 0)};
  const Unplaced u = ExplainUnplaced(Job(5, 500, 64, 50, {{"zone", "a"}}), hosts);
  EXPECT_EQ(u.job_id, 5);
  EXPECT_EQ(u.reason, "waiting for capacity: needs 500m cpu, 64 MiB memory");
  EXPECT_FALSE(u.never_fits);
  EXPECT_EQ(ExplainUnplaced(Job(5, 500, 64, 50, {{"zone", "b"}}), hosts).reason,
            "no host matches constraints zone=b");
}

}  // namespace
}  // namespace pgfleet::placement::testing_placement
