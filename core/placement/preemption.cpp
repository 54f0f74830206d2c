#include "core/placement/preemption.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace pgfleet::placement {
namespace {

// How good a set of victims is; smaller is better (the order of the header).
struct Choice {
  size_t count = 0;
  int max_priority = 0;
  int64_t total_priority = 0;
  std::string host_id;
  std::vector<int64_t> victims;  // ascending

  auto Key() const { return std::tie(count, max_priority, total_priority, host_id, victims); }
  bool operator<(const Choice& o) const { return Key() < o.Key(); }
};

// One host's search: the best subset of `cands` of exactly `k` victims that
// frees need_cpu and need_memory within the budgets, kept in *best.
class HostSearch {
 public:
  HostSearch(const std::vector<const RunningJob*>& cands, int64_t need_cpu, int64_t need_memory,
             const std::map<std::string, int>& may_lose)
      : cands_(cands), need_cpu_(need_cpu), need_memory_(need_memory), may_lose_(may_lose) {
    // What the candidates from index i on can still free, to prune early.
    suffix_cpu_.assign(cands.size() + 1, 0);
    suffix_memory_.assign(cands.size() + 1, 0);
    for (size_t i = cands.size(); i-- > 0;) {
      suffix_cpu_[i] = suffix_cpu_[i + 1] + std::max(0, cands[i]->cpu);
      suffix_memory_[i] = suffix_memory_[i + 1] + std::max(0, cands[i]->memory);
    }
  }

  // The best subset of exactly k candidates, or nullopt.
  std::optional<Choice> Best(size_t k) {
    best_.reset();
    k_ = k;
    chosen_.clear();
    taken_.clear();
    Walk(0, 0, 0);
    return best_;
  }

 private:
  void Walk(size_t from, int64_t cpu, int64_t memory) {
    if (chosen_.size() == k_) {
      if (cpu >= need_cpu_ && memory >= need_memory_) Consider();
      return;
    }
    const size_t left = k_ - chosen_.size();
    for (size_t i = from; i + left <= cands_.size(); ++i) {
      // Even every candidate from i on would not free enough: stop.
      if (cpu + suffix_cpu_[i] < need_cpu_ || memory + suffix_memory_[i] < need_memory_) return;
      const RunningJob& c = *cands_[i];
      auto budget = may_lose_.find(c.formation);
      int& used = taken_[c.formation];
      if (budget != may_lose_.end() && used >= budget->second) continue;
      ++used;
      chosen_.push_back(i);
      Walk(i + 1, cpu + std::max(0, c.cpu), memory + std::max(0, c.memory));
      chosen_.pop_back();
      --taken_[c.formation];
    }
  }

  void Consider() {
    Choice c;
    c.count = chosen_.size();
    for (size_t i : chosen_) {
      c.max_priority = std::max(c.max_priority, cands_[i]->priority);
      c.total_priority += cands_[i]->priority;
      c.victims.push_back(cands_[i]->id);
    }
    std::sort(c.victims.begin(), c.victims.end());
    if (!best_ || c < *best_) best_ = std::move(c);
  }

  const std::vector<const RunningJob*>& cands_;
  int64_t need_cpu_;
  int64_t need_memory_;
  const std::map<std::string, int>& may_lose_;
  std::vector<int64_t> suffix_cpu_;
  std::vector<int64_t> suffix_memory_;
  size_t k_ = 0;
  std::vector<size_t> chosen_;
  std::map<std::string, int> taken_;  // victims chosen per formation
  std::optional<Choice> best_;
};

// The fewest of `cands` (sorted largest first) that could free `need` of one
// resource, budgets aside: no subset smaller than this can.
size_t AtLeast(std::vector<int> sizes, int64_t need) {
  if (need <= 0) return 0;
  std::sort(sizes.rbegin(), sizes.rend());
  int64_t sum = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sum += std::max(0, sizes[i]);
    if (sum >= need) return i + 1;
  }
  return sizes.size() + 1;
}

// Whether `job` may run on `host` at all once room is made (everything but
// cpu and memory free now).
bool Eligible(const JobRequest& job, const HostView& host) {
  return job.cpu > 0 && job.memory > 0 && host.cpu_total >= job.cpu &&
         host.memory_total >= job.memory && host.condition.empty() && LabelsMatch(job, host) &&
         PickPorts(job, host).has_value();
}

}  // namespace

std::optional<Preemption> PickVictims(const JobRequest& job, const std::vector<HostView>& hosts,
                                      const std::vector<RunningJob>& running,
                                      const std::map<std::string, int>& may_lose) {
  std::map<std::string, std::vector<const RunningJob*>> by_host;  // eligible victims only
  for (const RunningJob& r : running) {
    if (r.preemptible && r.priority < job.priority) by_host[r.host_id].push_back(&r);
  }
  std::optional<Choice> best;
  for (const HostView& host : hosts) {
    if (!Eligible(job, host)) continue;
    const int64_t need_cpu = int64_t{job.cpu} - (int64_t{host.cpu_total} - host.cpu_allocated);
    const int64_t need_memory =
        int64_t{job.memory} - (int64_t{host.memory_total} - host.memory_allocated);
    if (need_cpu <= 0 && need_memory <= 0) {
      Choice fits{0, 0, 0, host.id, {}};
      if (!best || fits < *best) best = std::move(fits);
      continue;
    }
    std::vector<const RunningJob*> cands = by_host[host.id];
    std::sort(cands.begin(), cands.end(), [](const RunningJob* a, const RunningJob* b) {
      return std::make_tuple(a->priority, -int64_t{a->cpu} - a->memory, a->id) <
             std::make_tuple(b->priority, -int64_t{b->cpu} - b->memory, b->id);
    });
    if (cands.size() > static_cast<size_t>(kMaxVictimCandidates)) {
      cands.resize(kMaxVictimCandidates);
    }
    std::vector<int> cpus;
    std::vector<int> memories;
    for (const RunningJob* c : cands) {
      cpus.push_back(c->cpu);
      memories.push_back(c->memory);
    }
    size_t from = std::max(AtLeast(cpus, need_cpu), AtLeast(memories, need_memory));
    const size_t to = best ? std::min(cands.size(), best->count) : cands.size();
    HostSearch search(cands, need_cpu, need_memory, may_lose);
    for (size_t k = std::max<size_t>(from, 1); k <= to; ++k) {
      std::optional<Choice> here = search.Best(k);
      if (!here) continue;
      here->host_id = host.id;
      if (!best || *here < *best) best = std::move(here);
      break;  // more victims on this host are never better
    }
  }
  if (!best) return std::nullopt;
  return Preemption{best->host_id, best->victims};
}

}  // namespace pgfleet::placement
