// Preemption in the placement core (issue 38): PickVictims chooses the host
// where stopping the fewest, lowest-priority preemptible jobs of strictly
// lower priority makes room, within the formations' budgets, and only where
// the job could run otherwise.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/placement/preemption.h"
#include "placement_inputs.h"

namespace pgfleet::placement::testing_placement {
namespace {

RunningJob Running(int64_t id, std::string host, int cpu, int memory, int priority,
                   bool preemptible = true, std::string formation = "default") {
  return RunningJob{id, std::move(host), cpu, memory, priority, preemptible, std::move(formation)};
}

// A host with `running` on it, charged.
HostView Full(std::string id, int cpu, int memory, const std::vector<RunningJob>& running) {
  HostView h = Host(id, cpu, memory);
  for (const auto& r : running) {
    if (r.host_id != id) continue;
    h.cpu_allocated += r.cpu;
    h.memory_allocated += r.memory;
  }
  return h;
}

TEST(PickVictims, ChoosesTheFewestVictimsNotTheLowestPriorityOnes) {
  // Greedy lowest-priority-first would take 1, 2 and 3 (three victims); one
  // larger job of a higher (still lower than 90) priority makes room alone.
  std::vector<RunningJob> running = {
      Running(1, "h1", 1000, 1000, 10), Running(2, "h1", 1000, 1000, 10),
      Running(3, "h1", 1000, 1000, 10), Running(4, "h1", 3000, 3000, 20)};
  auto p = PickVictims(Job(9, 3000, 3000, 90), {Full("h1", 6000, 6000, running)}, running, {});
  ASSERT_TRUE(p);
  EXPECT_EQ("h1", p->host_id);
  EXPECT_EQ(std::vector<int64_t>{4}, p->victims);
}

TEST(PickVictims, AmongAsFewVictimsTakesTheLowestPriorities) {
  std::vector<RunningJob> running = {
      Running(1, "h1", 1000, 1000, 30), Running(2, "h1", 1000, 1000, 10),
      Running(3, "h1", 1000, 1000, 20), Running(4, "h1", 1000, 1000, 10)};
  auto p = PickVictims(Job(9, 2000, 2000, 90), {Full("h1", 4000, 4000, running)}, running, {});
  ASSERT_TRUE(p);
  EXPECT_EQ((std::vector<int64_t>{2, 4}), p->victims);
}

TEST(PickVictims, ComparesHostsByCountThenHighestThenTotalPriorityThenId) {
  std::vector<RunningJob> running = {
      Running(1, "a", 1000, 1000, 40),                                 // a: one victim of 40
      Running(2, "b", 500, 500, 10),   Running(3, "b", 500, 500, 10),  // b: two of 10
      Running(4, "c", 1000, 1000, 30),                                 // c: one of 30
      Running(5, "d", 1000, 1000, 30),                                 // d: one of 30, later id
  };
  std::vector<HostView> hosts;
  for (std::string h : {"d", "c", "b", "a"}) hosts.push_back(Full(h, 1000, 1000, running));
  auto p = PickVictims(Job(9, 1000, 1000, 90), hosts, running, {});
  ASSERT_TRUE(p);
  EXPECT_EQ("c", p->host_id);  // one victim beats two; 30 beats 40; c beats d
  EXPECT_EQ(std::vector<int64_t>{4}, p->victims);
}

TEST(PickVictims, NeverTakesAJobOfEqualOrHigherPriorityNorANonPreemptibleOne) {
  std::vector<RunningJob> running = {Running(1, "h1", 1000, 1000, 50),
                                     Running(2, "h2", 1000, 1000, 60),
                                     Running(3, "h3", 1000, 1000, 10, /*preemptible=*/false)};
  std::vector<HostView> hosts = {Full("h1", 1000, 1000, running), Full("h2", 1000, 1000, running),
                                 Full("h3", 1000, 1000, running)};
  EXPECT_FALSE(PickVictims(Job(9, 1000, 1000, 50), hosts, running, {}));
  // With a job of 51, only job 1 (priority 50) may go.
  auto p = PickVictims(Job(9, 1000, 1000, 51), hosts, running, {});
  ASSERT_TRUE(p);
  EXPECT_EQ("h1", p->host_id);
  EXPECT_EQ(std::vector<int64_t>{1}, p->victims);
}

TEST(PickVictims, KeepsEachFormationWithinItsBudget) {
  // Three replicas of web may lose one; two are needed to make room on h1.
  std::vector<RunningJob> running = {Running(1, "h1", 1000, 1000, 10, true, "web"),
                                     Running(2, "h1", 1000, 1000, 10, true, "web"),
                                     Running(3, "h2", 1000, 1000, 10, true, "web"),
                                     Running(4, "h2", 1000, 1000, 20, true, "batch")};
  std::vector<HostView> hosts = {Full("h1", 2000, 2000, running), Full("h2", 2000, 2000, running)};
  auto p = PickVictims(Job(9, 2000, 2000, 90), hosts, running, {{"web", 1}});
  ASSERT_TRUE(p);
  EXPECT_EQ("h2", p->host_id);  // one of web and the batch job
  EXPECT_EQ((std::vector<int64_t>{3, 4}), p->victims);
  EXPECT_FALSE(PickVictims(Job(9, 2000, 2000, 90), hosts, running, {{"web", 0}}));
  // A formation absent from the budgets has no limit.
  EXPECT_TRUE(PickVictims(Job(9, 2000, 2000, 90), hosts, running, {{"other", 0}}));
}

TEST(PickVictims, StillRequiresEverythingButRoom) {
  std::vector<RunningJob> running = {Running(1, "h1", 1000, 1000, 10)};
  HostView h = Full("h1", 1000, 1000, running);
  h.labels = {{"zone", "a"}};
  const JobRequest job = Job(9, 1000, 1000, 90);
  EXPECT_TRUE(PickVictims(job, {h}, running, {}));

  EXPECT_FALSE(PickVictims(Job(9, 1000, 1000, 90, {{"zone", "b"}}), {h}, running, {}));
  JobRequest pinned = job;
  pinned.pinned_host = "h2";
  EXPECT_FALSE(PickVictims(pinned, {h}, running, {}));
  JobRequest bridge = job;
  bridge.bridge = true;
  EXPECT_FALSE(PickVictims(bridge, {h}, running, {}));
  HostView sick = h;
  sick.condition = "disk pressure: 97% used";
  EXPECT_FALSE(PickVictims(job, {sick}, running, {}));
  HostView process = h;
  process.isolates = false;  // runs only privileged jobs
  EXPECT_FALSE(PickVictims(job, {process}, running, {}));
  HostView ports = h;
  ports.port_lo = 20000;
  ports.port_hi = 20000;
  ports.ports_held = {20000};  // held by someone: a victim's ports are not counted as freed
  JobRequest with_port = job;
  with_port.ports = {{"http", 0}};
  EXPECT_FALSE(PickVictims(with_port, {ports}, running, {}));
  EXPECT_FALSE(PickVictims(Job(9, 2000, 1000, 90), {h}, running, {}));  // bigger than the host
  EXPECT_FALSE(PickVictims(Job(9, 0, 1000, 90), {h}, running, {}));     // not a request
}

TEST(PickVictims, NulloptWhenEvenEveryEligibleVictimDoesNotMakeRoom) {
  std::vector<RunningJob> running = {Running(1, "h1", 500, 500, 10),
                                     Running(2, "h1", 500, 500, 90)};
  EXPECT_FALSE(PickVictims(Job(9, 1000, 1000, 90), {Full("h1", 1000, 1000, running)}, running, {}));
  EXPECT_FALSE(PickVictims(Job(9, 1000, 1000, 90), {}, running, {}));
}

TEST(PickVictims, AHostWithRoomWinsWithoutVictims) {
  std::vector<RunningJob> running = {Running(1, "h1", 1000, 1000, 10)};
  auto p =
      PickVictims(Job(9, 500, 500, 90),
                  {Full("h1", 1000, 1000, running), Full("h2", 1000, 1000, running)}, running, {});
  ASSERT_TRUE(p);
  EXPECT_EQ("h2", p->host_id);
  EXPECT_TRUE(p->victims.empty());
}

TEST(PickVictims, CountsCpuAndMemoryBoth) {
  // Job 1 frees the cpu but not the memory; 2 the memory not the cpu.
  std::vector<RunningJob> running = {Running(1, "h1", 2000, 100, 10),
                                     Running(2, "h1", 100, 2000, 10),
                                     Running(3, "h1", 1000, 1000, 20)};
  auto p = PickVictims(Job(9, 1500, 1500, 90), {Full("h1", 3100, 3100, running)}, running, {});
  ASSERT_TRUE(p);
  EXPECT_EQ((std::vector<int64_t>{1, 2}), p->victims);  // the only pair that frees both
}

// The reference: every subset of every host's eligible jobs, smallest by the
// header's order.
std::optional<Preemption> BruteForce(const JobRequest& job, const std::vector<HostView>& hosts,
                                     const std::vector<RunningJob>& running,
                                     const std::map<std::string, int>& may_lose) {
  std::optional<std::tuple<size_t, int, int64_t, std::string, std::vector<int64_t>>> best;
  for (const HostView& h : hosts) {
    if (!LabelsMatch(job, h) || !h.condition.empty() || h.cpu_total < job.cpu ||
        h.memory_total < job.memory)
      continue;
    std::vector<const RunningJob*> c;
    for (const auto& r : running) {
      if (r.host_id == h.id && r.preemptible && r.priority < job.priority) c.push_back(&r);
    }
    for (uint32_t mask = 0; mask < (1u << c.size()); ++mask) {
      int64_t cpu = h.cpu_total - h.cpu_allocated, memory = h.memory_total - h.memory_allocated;
      int max_p = 0;
      int64_t sum_p = 0;
      std::vector<int64_t> ids;
      std::map<std::string, int> used;
      bool ok = true;
      for (size_t i = 0; i < c.size(); ++i) {
        if (!(mask >> i & 1)) continue;
        cpu += c[i]->cpu;
        memory += c[i]->memory;
        max_p = std::max(max_p, c[i]->priority);
        sum_p += c[i]->priority;
        ids.push_back(c[i]->id);
        auto b = may_lose.find(c[i]->formation);
        if (b != may_lose.end() && ++used[c[i]->formation] > b->second) ok = false;
      }
      if (!ok || cpu < job.cpu || memory < job.memory) continue;
      std::sort(ids.begin(), ids.end());
      auto key = std::make_tuple(ids.size(), max_p, sum_p, h.id, ids);
      if (!best || key < *best) best = key;
    }
  }
  if (!best) return std::nullopt;
  return Preemption{std::get<3>(*best), std::get<4>(*best)};
}

TEST(PickVictims, MatchesAnExhaustiveSearchWhateverTheInputOrder) {
  std::mt19937 rng(38);
  for (int round = 0; round < 400; ++round) {
    std::vector<RunningJob> running;
    std::vector<HostView> hosts;
    const int n_hosts = 1 + static_cast<int>(rng() % 4);
    int64_t id = 1;
    for (int h = 0; h < n_hosts; ++h) {
      const std::string name = "h" + std::to_string(h);
      const int jobs = static_cast<int>(rng() % 7);
      for (int k = 0; k < jobs; ++k) {
        running.push_back(Running(id++, name, 100 * (1 + rng() % 8), 100 * (1 + rng() % 8),
                                  static_cast<int>(10 * (1 + rng() % 9)), rng() % 5 != 0,
                                  "f" + std::to_string(rng() % 3)));
      }
      hosts.push_back(Full(name, 2000, 2000, running));
    }
    std::map<std::string, int> budget;
    if (rng() % 2) budget["f0"] = static_cast<int>(rng() % 3);
    const JobRequest job = Job(999, 100 * (1 + rng() % 15), 100 * (1 + rng() % 15),
                               static_cast<int>(10 * (1 + rng() % 9)));
    auto want = BruteForce(job, hosts, running, budget);
    std::shuffle(hosts.begin(), hosts.end(), rng);
    std::shuffle(running.begin(), running.end(), rng);
    auto got = PickVictims(job, hosts, running, budget);
    ASSERT_EQ(want.has_value(), got.has_value()) << "round " << round;
    if (!want) continue;
    EXPECT_EQ(want->host_id, got->host_id) << "round " << round;
    EXPECT_EQ(want->victims, got->victims) << "round " << round;
  }
}

TEST(PickVictims, SearchesOnlyTheLowestPriorityCandidatesOfACrowdedHost) {
  // A host with more eligible jobs than kMaxVictimCandidates is searched
  // over its lowest-priority ones only: crowded's large job of 20 (which
  // would make room alone) is not seen, so room there takes 12 victims and
  // host few, with one victim, wins.
  std::vector<RunningJob> running;
  for (int i = 1; i <= 20; ++i) running.push_back(Running(i, "crowded", 100, 100, 10));
  running.push_back(Running(21, "crowded", 1200, 1200, 20));
  running.push_back(Running(22, "few", 1200, 1200, 30));
  std::vector<HostView> hosts = {Full("crowded", 3200, 3200, running),
                                 Full("few", 1200, 1200, running)};
  auto p = PickVictims(Job(99, 1200, 1200, 90), hosts, running, {});
  ASSERT_TRUE(p);
  EXPECT_EQ("few", p->host_id);
  EXPECT_EQ(std::vector<int64_t>{22}, p->victims);
}

}  // namespace
}  // namespace pgfleet::placement::testing_placement
