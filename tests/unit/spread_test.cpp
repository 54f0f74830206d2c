// Spread (placement.h, JobRequest::spread): a formation's jobs over hosts or
// over the values of a host label, as evenly as capacity allows, from where
// its jobs already run; packing stays the default.

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/placement/placement.h"

namespace pgfleet::placement {
namespace {

HostView ZoneHost(std::string id, std::string zone, int cpu = 4000, int memory = 8000) {
  HostView h;
  h.id = std::move(id);
  h.cpu_total = cpu;
  h.memory_total = memory;
  if (!zone.empty()) h.labels["zone"] = std::move(zone);
  return h;
}

std::vector<JobRequest> Replicas(int n, const std::string& spread, int64_t first_id = 1) {
  std::vector<JobRequest> out;
  for (int i = 0; i < n; ++i) {
    JobRequest j;
    j.id = first_id + i;
    j.cpu = 100;
    j.memory = 64;
    j.spread = spread;
    out.push_back(j);
  }
  return out;
}

// Placements per zone (by the hosts' labels) and per host.
std::map<std::string, int> PerZone(const Plan& plan, const std::vector<HostView>& hosts) {
  std::map<std::string, int> out;
  for (const auto& p : plan.placements) {
    for (const auto& h : hosts) {
      if (h.id == p.host_id) ++out[h.labels.count("zone") ? h.labels.at("zone") : ""];
    }
  }
  return out;
}

std::map<std::string, int> PerHost(const Plan& plan) {
  std::map<std::string, int> out;
  for (const auto& p : plan.placements) ++out[p.host_id];
  return out;
}

const std::vector<HostView> kSixHostsThreeZones = {
    ZoneHost("a1", "a"), ZoneHost("a2", "a"), ZoneHost("b1", "b"),
    ZoneHost("b2", "b"), ZoneHost("c1", "c"), ZoneHost("c2", "c")};

TEST(Spread, SixReplicasOverThreeZonesLandTwoInEach) {
  Plan plan = PlanPlacements(Replicas(6, "zone"), kSixHostsThreeZones);
  ASSERT_EQ(6u, plan.placements.size());
  EXPECT_EQ((std::map<std::string, int>{{"a", 2}, {"b", 2}, {"c", 2}}),
            PerZone(plan, kSixHostsThreeZones));
}

TEST(Spread, WithoutASpreadTheSameReplicasPackOntoOneHost) {
  Plan plan = PlanPlacements(Replicas(6, ""), kSixHostsThreeZones);
  EXPECT_EQ((std::map<std::string, int>{{"a1", 6}}), PerHost(plan));
}

TEST(Spread, StartsFromWhereTheFormationsJobsAlreadyRun) {
  // Two already in zone a: the next four go to b and c.
  Plan plan = PlanPlacements(Replicas(4, "zone"), kSixHostsThreeZones, {{"a1", 1}, {"a2", 1}});
  EXPECT_EQ((std::map<std::string, int>{{"b", 2}, {"c", 2}}), PerZone(plan, kSixHostsThreeZones));
}

TEST(Spread, AfterAZonesHostsAreLostTheRestStaySpread) {
  // Zone c is gone from the snapshot; the two of its replicas that are
  // replaced go one to a and one to b, which held two each.
  std::vector<HostView> left(kSixHostsThreeZones.begin(), kSixHostsThreeZones.begin() + 4);
  Plan plan = PlanPlacements(Replicas(2, "zone"), left, {{"a1", 2}, {"b2", 2}});
  EXPECT_EQ((std::map<std::string, int>{{"a", 1}, {"b", 1}}), PerZone(plan, left));
}

TEST(Spread, AsEvenlyAsCapacityAllows) {
  // Zone c has room for one replica only: the rest spread over a and b.
  std::vector<HostView> hosts = {ZoneHost("a1", "a"), ZoneHost("b1", "b"),
                                 ZoneHost("c1", "c", 150, 8000)};
  Plan plan = PlanPlacements(Replicas(7, "zone"), hosts);
  ASSERT_EQ(7u, plan.placements.size());
  EXPECT_EQ((std::map<std::string, int>{{"a", 3}, {"b", 3}, {"c", 1}}), PerZone(plan, hosts));
  for (const auto& h : hosts) {
    int cpu = 0;
    for (const auto& p : plan.placements) cpu += p.host_id == h.id ? 100 : 0;
    EXPECT_LE(cpu, h.cpu_total) << h.id;
  }
}

TEST(Spread, HostPutsThreeReplicasOnThreeHostsAndDoublesUpOnlyWhenItMust) {
  std::vector<HostView> hosts = {ZoneHost("h1", ""), ZoneHost("h2", ""), ZoneHost("h3", "")};
  Plan three = PlanPlacements(Replicas(3, "host"), hosts);
  EXPECT_EQ((std::map<std::string, int>{{"h1", 1}, {"h2", 1}, {"h3", 1}}), PerHost(three));
  Plan five = PlanPlacements(Replicas(5, "host"), hosts);
  EXPECT_EQ((std::map<std::string, int>{{"h1", 2}, {"h2", 2}, {"h3", 1}}), PerHost(five));
}

TEST(Spread, HostsWithoutTheLabelShareOneValue) {
  std::vector<HostView> hosts = {ZoneHost("a1", "a"), ZoneHost("x1", ""), ZoneHost("x2", "")};
  Plan plan = PlanPlacements(Replicas(4, "zone"), hosts);
  EXPECT_EQ((std::map<std::string, int>{{"a", 2}, {"", 2}}), PerZone(plan, hosts));
}

TEST(Spread, ConstraintsStillFilterAndTheRankIsDeterministic) {
  std::vector<JobRequest> jobs = Replicas(4, "host");
  for (auto& j : jobs) j.constraints = {{"zone", "a"}};
  Plan plan = PlanPlacements(jobs, kSixHostsThreeZones);
  EXPECT_EQ((std::map<std::string, int>{{"a1", 2}, {"a2", 2}}), PerHost(plan));
  std::vector<HostView> reversed(kSixHostsThreeZones.rbegin(), kSixHostsThreeZones.rend());
  std::vector<JobRequest> backwards(jobs.rbegin(), jobs.rend());
  Plan again = PlanPlacements(backwards, reversed);
  ASSERT_EQ(plan.placements.size(), again.placements.size());
  for (size_t i = 0; i < plan.placements.size(); ++i) {
    EXPECT_EQ(plan.placements[i].job_id, again.placements[i].job_id);
    EXPECT_EQ(plan.placements[i].host_id, again.placements[i].host_id);
  }
}

TEST(Spread, SpreadsBetterRanksTheEmptierValueFirstThenPacks) {
  JobRequest job = Replicas(1, "zone")[0];
  const auto& h = kSixHostsThreeZones;
  HostCounts counts = {{"a1", 1}};
  EXPECT_TRUE(SpreadsBetter(job, h[2], h[0], h, counts));   // b1 before a1
  EXPECT_FALSE(SpreadsBetter(job, h[1], h[2], h, counts));  // a2 after b1: zone a has one
  EXPECT_TRUE(SpreadsBetter(job, h[2], h[3], h, counts));   // b1 before b2: equal, lower id
}

}  // namespace
}  // namespace pgfleet::placement
