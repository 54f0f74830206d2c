// PlanPlacements over synthetic snapshots of growing size:
//   build-placement/bench/placement_bench
// Jobs and hosts come from a fixed seed, so runs are comparable; a quarter of
// the jobs carry a zone or disk constraint, and the cluster is sized so that
// some jobs wait, as a busy real one would.

#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "core/placement/placement.h"

namespace pgfleet::placement {
namespace {

std::vector<HostView> MakeHosts(int count, std::mt19937& rng) {
  const std::vector<std::string> zones = {"a", "b", "c", "d"};
  std::uniform_int_distribution<int> cores(2, 32), pick_zone(0, 3), coin(0, 1);
  std::vector<HostView> hosts;
  hosts.reserve(count);
  for (int i = 0; i < count; ++i) {
    HostView h;
    h.id = "host-" + std::to_string(i);
    const int c = cores(rng);
    h.cpu_total = c * 1000;
    h.memory_total = c * 4096;
    h.cpu_allocated = h.cpu_total / 4;
    h.memory_allocated = h.memory_total / 4;
    h.labels = {{"zone", zones[pick_zone(rng)]},
                {"disk", coin(rng) ? "ssd" : "hdd"},
                {"arch", "amd64"},
                {"kernel", "6.1"}};
    hosts.push_back(std::move(h));
  }
  return hosts;
}

std::vector<JobRequest> MakeJobs(int count, std::mt19937& rng) {
  const std::vector<std::string> zones = {"a", "b", "c", "d"};
  std::uniform_int_distribution<int> cpu(1, 50), memory(1, 64), priority(0, 100), which(0, 7),
      pick_zone(0, 3);
  std::vector<JobRequest> jobs;
  jobs.reserve(count);
  for (int i = 0; i < count; ++i) {
    JobRequest j;
    j.id = i + 1;
    j.cpu = cpu(rng) * 50;
    j.memory = memory(rng) * 64;
    j.priority = priority(rng);
    switch (which(rng)) {
      case 0:
        j.constraints = {{"zone", zones[pick_zone(rng)]}};
        break;
      case 1:
        j.constraints = {{"disk", "ssd"}, {"arch", "amd64"}};
        break;
      default:
        break;
    }
    jobs.push_back(std::move(j));
  }
  return jobs;
}

// Plans the jobs on the hosts once per iteration, counting what it placed.
void PlanEach(benchmark::State& state, const std::vector<JobRequest>& jobs,
              const std::vector<HostView>& hosts) {
  size_t placed = 0;
  for (auto _ : state) {
    Plan plan = PlanPlacements(jobs, hosts);
    placed = plan.placements.size();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["placed"] = static_cast<double>(placed);
  state.counters["unplaced"] = static_cast<double>(jobs.size() - placed);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(jobs.size()));
}

void BM_PlanPlacements(benchmark::State& state) {
  std::mt19937 rng(42);
  const int job_count = static_cast<int>(state.range(0));
  const int host_count = static_cast<int>(state.range(1));
  const std::vector<HostView> hosts = MakeHosts(host_count, rng);
  const std::vector<JobRequest> jobs = MakeJobs(job_count, rng);
  PlanEach(state, jobs, hosts);
}

BENCHMARK(BM_PlanPlacements)
    ->Args({100, 10})
    ->Args({1000, 100})
    ->Args({10000, 1000})
    ->ArgNames({"jobs", "hosts"})
    ->Unit(benchmark::kMillisecond);

// The same snapshot with every job asking for one port 0 (issue 37), on
// hosts whose range of 12,001 ports already holds a tenth: what named ports
// cost a plan beside BM_PlanPlacements.
void BM_PlanPlacementsWithPorts(benchmark::State& state) {
  std::mt19937 rng(42);
  const int job_count = static_cast<int>(state.range(0));
  std::vector<HostView> hosts = MakeHosts(static_cast<int>(state.range(1)), rng);
  for (auto& h : hosts) {
    h.port_lo = 20000;
    h.port_hi = 32000;
    for (int p = h.port_lo; p <= h.port_hi; p += 10) h.ports_held.insert(p);
  }
  std::vector<JobRequest> jobs = MakeJobs(job_count, rng);
  for (auto& j : jobs) j.ports = {{"http", 0}};
  PlanEach(state, jobs, hosts);
}

BENCHMARK(BM_PlanPlacementsWithPorts)
    ->Args({1000, 100})
    ->Args({10000, 1000})
    ->ArgNames({"jobs", "hosts"})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pgfleet::placement
