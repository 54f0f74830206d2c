#include "core/placement/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace pgfleet::placement {
namespace {

HostView Host(std::string id, int cpu_total, int memory_total,
              std::map<std::string, std::string> labels = {}) {
  HostView h;
  h.id = std::move(id);
  h.cpu_total = cpu_total;
  h.memory_total = memory_total;
  h.labels = std::move(labels);
  return h;
}

HostView Used(HostView h, int cpu_allocated, int memory_allocated) {
  h.cpu_allocated = cpu_allocated;
  h.memory_allocated = memory_allocated;
  return h;
}

JobRequest Job(int64_t id, int cpu, int memory, int priority = 50,
               std::map<std::string, std::string> constraints = {}) {
  JobRequest j;
  j.id = id;
  j.cpu = cpu;
  j.memory = memory;
  j.priority = priority;
  j.constraints = std::move(constraints);
  return j;
}

// job id -> host id, for plans where the order of placements does not matter.
std::map<int64_t, std::string> Where(const Plan& plan) {
  std::map<int64_t, std::string> out;
  for (const auto& p : plan.placements) out[p.job_id] = p.host_id;
  return out;
}

// --- Feasibility -----------------------------------------------------------

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

// --- Ranking ---------------------------------------------------------------

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

// --- Plan ------------------------------------------------------------------

TEST(PlacesBefore, HigherPriorityThenLowerId) {
  EXPECT_TRUE(PlacesBefore(Job(9, 1, 1, 80), Job(1, 1, 1, 50)));
  EXPECT_FALSE(PlacesBefore(Job(1, 1, 1, 50), Job(9, 1, 1, 80)));
  EXPECT_TRUE(PlacesBefore(Job(1, 1, 1, 50), Job(2, 1, 1, 50)));
  EXPECT_FALSE(PlacesBefore(Job(2, 1, 1, 50), Job(1, 1, 1, 50)));
}

TEST(Placement, HigherPriorityPlacedFirstWhenCapacityShort) {
  const Plan plan =
      PlanPlacements({Job(1, 600, 100, 10), Job(2, 600, 100, 90)}, {Host("h1", 1000, 1000)});
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].job_id, 2);
  ASSERT_EQ(plan.unplaced.size(), 1u);
  EXPECT_EQ(plan.unplaced[0].job_id, 1);
  EXPECT_FALSE(plan.unplaced[0].never_fits);
}

TEST(Placement, EqualPriorityPlacedByLowerIdFirst) {
  const Plan plan = PlanPlacements({Job(7, 600, 100), Job(3, 600, 100)}, {Host("h1", 1000, 1000)});
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].job_id, 3);
}

TEST(Placement, PlacementsAreListedInPlanOrder) {
  const Plan plan = PlanPlacements({Job(3, 1, 1, 10), Job(1, 1, 1, 10), Job(2, 1, 1, 90)},
                                   {Host("h1", 1000, 1000)});
  ASSERT_EQ(plan.placements.size(), 3u);
  EXPECT_EQ(plan.placements[0].job_id, 2);
  EXPECT_EQ(plan.placements[1].job_id, 1);
  EXPECT_EQ(plan.placements[2].job_id, 3);
}

TEST(Placement, EachPlacementTakesRoomFromLaterJobs) {
  // Both jobs prefer h1 (fuller), but only one fits there.
  const Plan plan =
      PlanPlacements({Job(1, 300, 300), Job(2, 300, 300)},
                     {Used(Host("h1", 1000, 1000), 500, 500), Host("h2", 1000, 1000)});
  const auto where = Where(plan);
  EXPECT_EQ(where.at(1), "h1");
  EXPECT_EQ(where.at(2), "h2");
}

// A request that found no room is not looked for again for a request at
// least as large in cpu and memory (room only shrinks during a plan), but a
// smaller one in either is still placed where it fits.
TEST(Placement, AfterARequestFindsNoRoomSmallerOnesStillFitWhatIsLeft) {
  const Plan plan =
      PlanPlacements({Job(1, 600, 100), Job(2, 600, 100), Job(3, 600, 100), Job(4, 700, 100),
                      Job(5, 300, 100), Job(6, 300, 900), Job(7, 100, 50, 50, {{"zone", "b"}})},
                     {Host("h1", 1000, 1000), Host("h2", 1000, 1000, {{"zone", "b"}})});
  // 1 on h1, 2 on h2, 3 nowhere (400m left on each), 4 (larger) nowhere
  // without a look; 5 (less cpu) into h1's 400m; 6 (less cpu, more memory)
  // still looked for, and on h2; 7 (another group) finds h2's memory gone.
  EXPECT_EQ(Where(plan),
            (std::map<int64_t, std::string>{{1, "h1"}, {2, "h2"}, {5, "h1"}, {6, "h2"}}));
  ASSERT_EQ(plan.unplaced.size(), 3u);
  const std::vector<JobRequest> waiting = {Job(3, 600, 100), Job(4, 700, 100),
                                           Job(7, 100, 50, 50, {{"zone", "b"}})};
  for (size_t i = 0; i < waiting.size(); ++i) {
    EXPECT_EQ(plan.unplaced[i].job_id, waiting[i].id);
    EXPECT_EQ(plan.unplaced[i].reason, CapacityReason(waiting[i]));
    EXPECT_FALSE(plan.unplaced[i].never_fits);
  }
}

TEST(Placement, BinPackingFillsOneHostBeforeStartingAnother) {
  std::vector<JobRequest> jobs;
  for (int i = 1; i <= 6; ++i) jobs.push_back(Job(i, 250, 250));
  const Plan plan = PlanPlacements(jobs, {Host("h1", 1000, 1000), Host("h2", 1000, 1000)});
  const auto where = Where(plan);
  ASSERT_EQ(where.size(), 6u);
  for (int i = 1; i <= 4; ++i) EXPECT_EQ(where.at(i), "h1") << "job " << i;
  for (int i = 5; i <= 6; ++i) EXPECT_EQ(where.at(i), "h2") << "job " << i;
}

TEST(Placement, PlanDoesNotDependOnInputOrder) {
  std::vector<JobRequest> jobs;
  for (int i = 1; i <= 40; ++i) {
    jobs.push_back(Job(i, 50 * (i % 7 + 1), 64 * (i % 5 + 1), i % 3 * 20,
                       i % 4 == 0 ? std::map<std::string, std::string>{{"zone", "a"}}
                                  : std::map<std::string, std::string>{}));
  }
  std::vector<HostView> hosts;
  for (int i = 0; i < 8; ++i) {
    hosts.push_back(Host("h" + std::to_string(i), 1000, 1024, {{"zone", i % 2 ? "a" : "b"}}));
  }
  const Plan first = PlanPlacements(jobs, hosts);
  std::mt19937 rng(7);
  std::shuffle(jobs.begin(), jobs.end(), rng);
  std::shuffle(hosts.begin(), hosts.end(), rng);
  const Plan second = PlanPlacements(jobs, hosts);
  ASSERT_EQ(first.placements.size(), second.placements.size());
  for (size_t i = 0; i < first.placements.size(); ++i) {
    EXPECT_EQ(first.placements[i].job_id, second.placements[i].job_id);
    EXPECT_EQ(first.placements[i].host_id, second.placements[i].host_id);
  }
  ASSERT_EQ(first.unplaced.size(), second.unplaced.size());
  for (size_t i = 0; i < first.unplaced.size(); ++i) {
    EXPECT_EQ(first.unplaced[i].job_id, second.unplaced[i].job_id);
    EXPECT_EQ(first.unplaced[i].reason, second.unplaced[i].reason);
  }
}

// Random snapshots (fixed seed): whatever the input, a plan never puts more on
// a host than it has, places only where labels match, accounts for every job
// exactly once, leaves a job unplaced only when it fits no matching host, and
// says never_fits exactly when no matching host could hold it even empty.
TEST(Placement, PlanNeverOvercommitsAHost) {
  std::mt19937 rng(20240611);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::vector<std::string> zones = {"a", "b", "c"};
  size_t placed_total = 0, waiting_total = 0, never_total = 0;

  for (int round = 0; round < 300; ++round) {
    std::vector<HostView> hosts;
    const int host_count = uniform(0, 12);
    for (int i = 0; i < host_count; ++i) {
      const int cpu = uniform(1, 8) * 500;
      const int memory = uniform(1, 16) * 512;
      std::map<std::string, std::string> labels{{"zone", zones[uniform(0, 2)]}};
      if (uniform(0, 1)) labels["disk"] = "ssd";
      hosts.push_back(Used(Host("h" + std::to_string(i), cpu, memory, labels), uniform(0, cpu),
                           uniform(0, memory)));
    }
    std::vector<JobRequest> jobs;
    const int job_count = uniform(0, 80);
    for (int i = 0; i < job_count; ++i) {
      std::map<std::string, std::string> constraints;
      if (uniform(0, 3) == 0) constraints["zone"] = zones[uniform(0, 2)];
      if (uniform(0, 5) == 0) constraints["disk"] = "ssd";
      if (uniform(0, 30) == 0) constraints["gpu"] = "yes";  // matches nothing
      jobs.push_back(
          Job(1000 + i, uniform(1, 2500), uniform(1, 5000), uniform(0, 100), constraints));
    }

    const Plan plan = PlanPlacements(jobs, hosts);

    std::map<int64_t, const JobRequest*> job_by_id;
    for (const auto& j : jobs) job_by_id[j.id] = &j;
    std::map<std::string, HostView> after;
    for (const auto& h : hosts) after[h.id] = h;

    std::multiset<int64_t> seen;
    for (const auto& p : plan.placements) {
      seen.insert(p.job_id);
      const JobRequest& job = *job_by_id.at(p.job_id);
      HostView& host = after.at(p.host_id);
      ASSERT_TRUE(LabelsMatch(job, host)) << "job " << job.id << " on " << host.id;
      host.cpu_allocated += job.cpu;
      host.memory_allocated += job.memory;
    }
    for (const auto& u : plan.unplaced) seen.insert(u.job_id);
    for (const auto& j : jobs) ASSERT_EQ(seen.count(j.id), 1u) << "job " << j.id;
    ASSERT_EQ(seen.size(), jobs.size());

    for (const auto& [id, host] : after) {
      ASSERT_LE(host.cpu_allocated, host.cpu_total) << "round " << round << " host " << id;
      ASSERT_LE(host.memory_allocated, host.memory_total) << "round " << round << " host " << id;
    }
    for (const auto& u : plan.unplaced) {
      const JobRequest& job = *job_by_id.at(u.job_id);
      bool could_fit_empty = false;
      for (const auto& [id, host] : after) {
        if (!LabelsMatch(job, host)) continue;
        ASSERT_FALSE(Fits(job, host)) << "job " << job.id << " left out but fits " << id;
        could_fit_empty |= host.cpu_total >= job.cpu && host.memory_total >= job.memory;
      }
      ASSERT_EQ(u.never_fits, !could_fit_empty) << "job " << job.id << ": " << u.reason;
      ASSERT_FALSE(u.reason.empty());
      (u.never_fits ? never_total : waiting_total)++;
    }
    placed_total += plan.placements.size();
  }
  // The generator exercises every outcome, or the property above proves little.
  EXPECT_GT(placed_total, 1000u);
  EXPECT_GT(waiting_total, 100u);
  EXPECT_GT(never_total, 100u);
}

// --- Reasons ---------------------------------------------------------------

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
}  // namespace pgfleet::placement
