// Placement's rank (core/placement/README.md): among the hosts a job fits,
// bin-packing picks the fullest after placement, fullness relative to the
// host's size, ties to the lower host id, decided exactly.

#include <gtest/gtest.h>

#include <vector>

#include "core/placement/placement.h"
#include "placement_inputs.h"

namespace pgfleet::placement::testing_placement {
namespace {

TEST(Placement, PacksFullerHostFirst) {
  const Plan plan =
      PlanPlacements({Job(1, 100, 100)},
                     {Used(Host("a-emptier", 1000, 1000), 100, 100),
                      Used(Host("b-fuller", 1000, 1000), 500, 500), Host("c-empty", 1000, 1000)});
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].host_id, "b-fuller");
}

TEST(Placement, FullnessIsRelativeToTheHostsSize) {
  // After placement: small is (300/400 + 300/400)/2 = 75% full, big is
  // (700/2000 + 700/2000)/2 = 35% full, although big has more allocated.
  const Plan plan = PlanPlacements({Job(1, 100, 100)}, {Used(Host("big", 2000, 2000), 600, 600),
                                                        Used(Host("small", 400, 400), 200, 200)});
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].host_id, "small");
}

TEST(Placement, ScoreIsTheMeanOfCpuAndMemoryUtilisation) {
  // cpu-heavy: (900/1000 + 100/1000)/2 = 50%; balanced: (600/1000 + 600/1000)/2 = 60%.
  const Plan plan =
      PlanPlacements({Job(1, 100, 100)}, {Used(Host("a-cpu-heavy", 1000, 1000), 800, 0),
                                          Used(Host("b-balanced", 1000, 1000), 500, 500)});
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].host_id, "b-balanced");
}

TEST(Placement, EquallyFullHostsGoToTheLowerHostIdWhateverTheInputOrder) {
  const std::vector<HostView> forward = {Host("h1", 1000, 1000), Host("h2", 1000, 1000),
                                         Host("h3", 2000, 2000)};
  std::vector<HostView> backward(forward.rbegin(), forward.rend());
  // h1 and h2 end equally full (10%), h3 emptier (5%).
  EXPECT_EQ(PlanPlacements({Job(1, 100, 100)}, forward).placements.at(0).host_id, "h1");
  EXPECT_EQ(PlanPlacements({Job(1, 100, 100)}, backward).placements.at(0).host_id, "h1");
}

TEST(PacksTighter, PrefersFullerThenLowerId) {
  const JobRequest job = Job(1, 100, 100);
  const HostView fuller = Used(Host("z", 1000, 1000), 500, 500);
  const HostView emptier = Host("a", 1000, 1000);
  EXPECT_TRUE(PacksTighter(job, fuller, emptier));
  EXPECT_FALSE(PacksTighter(job, emptier, fuller));
  // Same fullness by different fractions: 1/4 + 3/4 against 2/4 + 2/4.
  const HostView x = Used(Host("x", 400, 400), 0, 200);
  const HostView y = Used(Host("y", 400, 400), 100, 100);
  EXPECT_TRUE(PacksTighter(job, x, y));
  EXPECT_FALSE(PacksTighter(job, y, x));
  EXPECT_FALSE(PacksTighter(job, x, x));
}

TEST(PacksTighter, TiesAreExactNotRounded) {
  // 1/10 + 7/10 and 3/10 + 5/10 are both 8/10, but 0.1 + 0.7 != 0.3 + 0.5 in
  // doubles; the tie must still go to the lower id.
  const JobRequest job = Job(1, 1, 1);
  const HostView a = Used(Host("a", 10, 10), 0, 6);
  const HostView b = Used(Host("b", 10, 10), 2, 4);
  ASSERT_LT(1.0 / 10 + 7.0 / 10, 3.0 / 10 + 5.0 / 10);  // doubles alone would pick b
  EXPECT_TRUE(PacksTighter(job, a, b));
  EXPECT_FALSE(PacksTighter(job, b, a));
}

}  // namespace
}  // namespace pgfleet::placement::testing_placement
