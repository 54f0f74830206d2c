// Warm-host affinity (core/placement/README.md, rank): among the feasible
// hosts a job's rootfs was run on recently rank first, before bin-pack
// fullness; never over room, the spread or the order of jobs.

#include <gtest/gtest.h>

#include <vector>

#include "core/placement/placement.h"
#include "placement_inputs.h"

namespace pgfleet::placement::testing_placement {
namespace {

HostView Warm(HostView h, std::set<std::string> rootfs) {
  h.rootfs_warm = std::move(rootfs);
  return h;
}

JobRequest WithRootfs(JobRequest j, std::string rootfs) {
  j.rootfs = std::move(rootfs);
  return j;
}

TEST(Warm, AWarmHostWinsBetweenTwoIdleHosts) {
  // Without warmth h1 wins (equal fullness, the lower id).
  const std::vector<HostView> hosts = {Host("h1", 1000, 1000),
                                       Warm(Host("h2", 1000, 1000), {"alpine"})};
  EXPECT_EQ(Where(PlanPlacements({Job(1, 100, 100)}, hosts)).at(1), "h1");
  EXPECT_EQ(Where(PlanPlacements({WithRootfs(Job(1, 100, 100), "alpine")}, hosts)).at(1), "h2");
  // Warm for another rootfs is cold for this one.
  EXPECT_EQ(Where(PlanPlacements({WithRootfs(Job(1, 100, 100), "debian")}, hosts)).at(1), "h1");
}

TEST(Warm, WarmthWinsOverBinPackFullness) {
  const std::vector<HostView> hosts = {Used(Host("fuller", 1000, 1000), 800, 800),
                                       Warm(Host("warm-empty", 1000, 1000), {"alpine"})};
  EXPECT_EQ(Where(PlanPlacements({WithRootfs(Job(1, 100, 100), "alpine")}, hosts)).at(1),
            "warm-empty");
  EXPECT_TRUE(RanksBefore(WithRootfs(Job(1, 100, 100), "alpine"), hosts[1], hosts[0]));
  EXPECT_FALSE(RanksBefore(WithRootfs(Job(1, 100, 100), "alpine"), hosts[0], hosts[1]));
}

TEST(Warm, AColdHostWithRoomWinsOverAWarmFullOne) {
  const std::vector<HostView> hosts = {Warm(Used(Host("warm-full", 1000, 1000), 950, 950), {"alpine"}),
                                       Host("cold", 1000, 1000)};
  EXPECT_EQ(Where(PlanPlacements({WithRootfs(Job(1, 100, 100), "alpine")}, hosts)).at(1), "cold");
}

TEST(Warm, AmongWarmHostsBinPackDecides) {
  const std::vector<HostView> hosts = {Warm(Host("a-empty", 1000, 1000), {"alpine"}),
                                       Warm(Used(Host("b-fuller", 1000, 1000), 500, 500), {"alpine"}),
                                       Used(Host("c-fullest-cold", 1000, 1000), 800, 800)};
  EXPECT_EQ(Where(PlanPlacements({WithRootfs(Job(1, 100, 100), "alpine")}, hosts)).at(1),
            "b-fuller");
}

TEST(Warm, PriorityOrderIsUnchanged) {
  // One warm host with room for one job: the higher-priority job gets it,
  // though only the lower-priority one names the warm rootfs.
  const std::vector<HostView> hosts = {Warm(Used(Host("warm", 1000, 1000), 800, 800), {"alpine"})};
  const Plan plan = PlanPlacements(
      {WithRootfs(Job(1, 200, 200, 10), "alpine"), WithRootfs(Job(2, 200, 200, 90), "debian")},
      hosts);
  EXPECT_EQ(Where(plan), (std::map<int64_t, std::string>{{2, "warm"}}));
  ASSERT_EQ(plan.unplaced.size(), 1u);
  EXPECT_EQ(plan.unplaced[0].job_id, 1);
}

TEST(Warm, SpreadStillSpreads) {
  // Three replicas spread over hosts, only h1 warm: one on each host, the
  // warm one first (the spread ties at zero, warmth picks).
  JobRequest r = WithRootfs(Job(1, 100, 100), "alpine");
  r.spread = "host";
  std::vector<JobRequest> jobs = {r, r, r};
  jobs[1].id = 2;
  jobs[2].id = 3;
  const std::vector<HostView> hosts = {Host("h0", 1000, 1000),
                                       Warm(Host("h1", 1000, 1000), {"alpine"}),
                                       Host("h2", 1000, 1000)};
  const auto where = Where(PlanPlacements(jobs, hosts));
  EXPECT_EQ(where.at(1), "h1");
  std::set<std::string> used;
  for (const auto& [job, host] : where) used.insert(host);
  EXPECT_EQ(used.size(), 3u);
  // The warm host already has one: a cold host with none wins.
  EXPECT_TRUE(SpreadsBetter(r, hosts[0], hosts[1], hosts, {{"h1", 1}}));
  EXPECT_TRUE(SpreadsBetter(r, hosts[1], hosts[0], hosts, {}));
}

TEST(Warm, AJobWithoutRootfsIsWarmNowhere) {
  EXPECT_FALSE(IsWarm(Job(1, 1, 1), Warm(Host("h", 1, 1), {""})));
  EXPECT_TRUE(IsWarm(WithRootfs(Job(1, 1, 1), "a"), Warm(Host("h", 1, 1), {"a"})));
}

}  // namespace
}  // namespace pgfleet::placement::testing_placement
