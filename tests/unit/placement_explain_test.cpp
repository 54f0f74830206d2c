// Explain (core/placement/explain.h): where one job would go and, for every
// other host, the first filter that turns it away, counted by kind; and that
// its verdicts are the plan's (a host is feasible exactly when the plan could
// place the job on it).

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/placement/explain.h"
#include "placement_inputs.h"

namespace pgfleet::placement::testing_placement {
namespace {

TEST(Explain, CountsEveryHostAJobFitsNowhereOnByKind) {
  JobRequest job = Job(1, 500, 1024, 50, {{"zone", "a"}});
  HostView pressured = Host("h6", 4000, 8192, {{"zone", "a"}});
  pressured.condition = "disk pressure: /var/lib/pgfleet 97% used";
  HostView process = Host("h7", 4000, 8192, {{"zone", "a"}});
  process.isolates = false;
  const std::vector<HostView> hosts = {
      Host("h1", 4000, 8192, {{"zone", "b"}}),
      Host("h2", 4000, 8192, {{"zone", "b"}}),
      Host("h3", 4000, 8192),
      Used(Host("h4", 4000, 8192, {{"zone", "a"}}), 1000, 7680),  // 512 MiB free
      Used(Host("h5", 4000, 8192, {{"zone", "a"}}), 3800, 0),     // 200m free
      pressured,
      process};
  Explanation e = ExplainJob(job, hosts);
  AddNotUp(&e, "draining", 1);
  EXPECT_EQ(e.host, "");
  EXPECT_EQ(e.feasible, 0);
  EXPECT_FALSE(e.never_fits);
  EXPECT_EQ(ExplanationText(e),
            "would not place now: waiting for capacity: needs 500m cpu, 1024 MiB memory\n"
            "not on 8 hosts: 3 filtered by constraint zone=a, 1 do not isolate jobs (process "
            "driver: privileged jobs only), 1 under condition disk pressure, 1 lacked cpu "
            "(largest free 200m), 1 lacked memory (largest free 512 MiB), 1 draining\n");
}

TEST(Explain, NamesTheHostItPicksAndWhy) {
  JobRequest job = Job(1, 100, 100);
  job.rootfs = "alpine";
  HostView warm = Host("h2", 1000, 1000);
  warm.rootfs_warm = {"alpine"};
  const std::vector<HostView> hosts = {Used(Host("h1", 1000, 1000), 500, 500), warm,
                                       Host("h3", 50, 1000)};
  const Explanation e = ExplainJob(job, hosts);
  EXPECT_EQ(e.host, "h2");
  EXPECT_EQ(e.feasible, 2);
  EXPECT_EQ(ExplanationText(e),
            "would place on h2 (warm: ran rootfs alpine; bin-pack: 10% full after placing)\n"
            "not on 2 hosts: 1 lacked cpu (largest free 50m), 1 ranked lower\n");
}

TEST(Explain, ConstraintsAreCountedByTheFirstKeyAHostLacks) {
  JobRequest job = Job(1, 100, 100, 50, {{"disk", "ssd"}, {"zone", "b"}});
  const Explanation e = ExplainJob(job, {Host("h1", 1000, 1000, {{"zone", "b"}}),
                                         Host("h2", 1000, 1000, {{"disk", "ssd"}}),
                                         Host("h3", 1000, 1000, {{"disk", "hdd"}})});
  EXPECT_TRUE(e.never_fits);
  EXPECT_EQ(ExplanationText(e),
            "would not place now: no host matches constraints disk=ssd,zone=b\n"
            "not on 3 hosts: 2 filtered by constraint disk=ssd, 1 filtered by constraint zone=b\n");
}

TEST(Explain, PinnedBridgeAndPortsHaveTheirKinds) {
  JobRequest pinned = Job(1, 100, 100);
  pinned.pinned_host = "h9";
  EXPECT_EQ(FirstRejection(pinned, Host("h1", 1000, 1000)).kind, Rejection::kPinnedElsewhere);
  JobRequest bridge = Job(1, 100, 100);
  bridge.bridge = true;
  EXPECT_EQ(FirstRejection(bridge, Host("h1", 1000, 1000)).kind, Rejection::kNoBridge);
  JobRequest ports = Job(1, 100, 100);
  ports.ports = {{"web", 20000}};
  HostView h = Host("h1", 1000, 1000);
  h.port_lo = 20000;
  h.port_hi = 20001;
  EXPECT_EQ(FirstRejection(ports, h).kind, Rejection::kNone);
  h.ports_held = {20000};
  EXPECT_EQ(FirstRejection(ports, h).kind, Rejection::kPorts);
  EXPECT_EQ(FirstRejection(Job(1, 100, 100), Host("empty", 0, 0)).kind, Rejection::kCpu);
}

TEST(Explain, SpreadIsARankTerm) {
  JobRequest job = Job(1, 100, 100);
  job.spread = "zone";
  const Explanation e = ExplainJob(
      job, {Host("h1", 1000, 1000, {{"zone", "a"}}), Host("h2", 1000, 1000, {{"zone", "b"}})},
      {{"h1", 2}});
  EXPECT_EQ(e.host, "h2");
  ASSERT_FALSE(e.rank.empty());
  EXPECT_EQ(e.rank[0], "spread: 0 of its formation's jobs on zone=b");
}

// A host that lacks room counts as "would need preemption of N" when
// stopping N lower-priority preemptible jobs there frees enough (N the
// fewest, within budgets); otherwise it keeps its cpu or memory kind.
TEST(Explain, CountsHostsWherePreemptionWouldMakeRoomByVictims) {
  JobRequest job = Job(1, 2000, 2000, 90);
  auto run = [](int64_t id, std::string host, int size, int priority, bool preemptible = true,
                std::string formation = "default") {
    return RunningJob{id, std::move(host), size, size, priority, preemptible,
                      std::move(formation)};
  };
  PreemptionView p;
  p.candidates = {
      run(1, "h1", 2000, 10),                        // h1: one victim frees enough
      run(2, "h2", 1000, 10), run(3, "h2", 1000, 20),  // h2: two
      run(4, "h3", 2000, 95),                        // h3: higher priority: none
      run(5, "h4", 2000, 10, false),                 // h4: not preemptible
      run(6, "h5", 2000, 10, true, "web"),           // h5: its formation's budget is spent
      run(7, "h6", 2000, 10)};                       // h6: too small even when empty
  p.may_lose = {{"web", 0}};
  auto full = [&](std::string id, int size) {
    HostView h = Host(id, size, size);
    for (const auto& r : p.candidates) {
      if (r.host_id == id) h = Used(h, h.cpu_allocated + r.cpu, h.memory_allocated + r.memory);
    }
    return h;
  };
  const std::vector<HostView> hosts = {full("h1", 2000), full("h2", 2000), full("h3", 2000),
                                       full("h4", 2000), full("h5", 2000), full("h6", 1500)};
  const Explanation e = ExplainJob(job, hosts, {}, &p);
  EXPECT_EQ(ExplanationText(e),
            "would not place now: waiting for capacity: needs 2000m cpu, 2000 MiB memory\n"
            "not on 6 hosts: 4 lacked cpu (largest free 0m), 1 would need preemption of 1 job, 1 "
            "would need preemption of 2 jobs\n");
  // Without the candidates (or for a job of lower priority) nothing changes.
  EXPECT_EQ(ExplainJob(job, hosts).rejected.size(), 1u);
  EXPECT_EQ(ExplainJob(Job(1, 2000, 2000, 5), hosts, {}, &p).rejected.size(), 1u);
}

// Over random fleets: a host has no rejection exactly when the plan of the
// job alone on that host places it, and the explanation's pick is the plan's.
TEST(Explain, VerdictsAreThePlansOnRandomFleets) {
  std::mt19937 rng(38);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  for (int round = 0; round < 2000; ++round) {
    std::vector<HostView> hosts;
    for (int i = 0, n = 1 + pick(6); i < n; ++i) {
      HostView h = Used(Host("h" + std::to_string(i), pick(3) * 1000, pick(3) * 1000,
                             {{"zone", pick(2) ? "a" : "b"}}),
                        pick(2000), pick(2000));
      h.isolates = pick(5) > 0;
      h.bridge = pick(2) > 0;
      if (pick(6) == 0) h.condition = "disk pressure: x";
      h.port_lo = 20000;
      h.port_hi = 20000 + pick(3) - 1;
      if (pick(3) == 0) h.ports_held = {20000};
      if (pick(2)) h.rootfs_warm = {"r"};
      hosts.push_back(h);
    }
    JobRequest job = Job(1, 1 + pick(1500), 1 + pick(1500));
    if (pick(2)) job.constraints = {{"zone", "a"}};
    job.privileged = pick(4) == 0;
    job.bridge = pick(4) == 0;
    if (pick(3) == 0) job.ports = {{"p", 0}};
    if (pick(4) == 0) job.pinned_host = "h" + std::to_string(pick(7));
    if (pick(2)) job.rootfs = "r";
    for (const HostView& h : hosts) {
      const bool alone = !PlanPlacements({job}, {h}).placements.empty();
      EXPECT_EQ(FirstRejection(job, h).kind == Rejection::kNone, alone) << "round " << round;
    }
    const Plan plan = PlanPlacements({job}, hosts);
    const Explanation e = ExplainJob(job, hosts);
    EXPECT_EQ(e.host, plan.placements.empty() ? "" : plan.placements[0].host_id);
    EXPECT_EQ(e.feasible > 0, !plan.placements.empty());
    int counted = e.host.empty() ? 0 : 1;
    for (const auto& c : e.rejected) counted += c.hosts;
    EXPECT_EQ(counted, static_cast<int>(hosts.size()));
  }
}

}  // namespace
}  // namespace pgfleet::placement::testing_placement
