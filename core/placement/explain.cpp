#include "core/placement/explain.h"

#include <algorithm>
#include <tuple>

namespace pgfleet::placement {
namespace {

// The mean of cpu and memory utilisation after placing `job`, in whole percent.
int PercentFullAfter(const JobRequest& job, const HostView& host) {
  if (host.cpu_total <= 0 || host.memory_total <= 0) return 100;
  const double cpu = double(int64_t{host.cpu_allocated} + job.cpu) / host.cpu_total;
  const double memory = double(int64_t{host.memory_allocated} + job.memory) / host.memory_total;
  return static_cast<int>((cpu + memory) * 50);
}

// A host's value of a spread key, as the plan reads it.
std::string SpreadValueOf(const std::string& key, const HostView& host) {
  if (key == "host") return host.id;
  auto it = host.labels.find(key);
  return it == host.labels.end() ? "" : it->second;
}

void Count(std::vector<RejectionCount>* out, Rejection kind, const std::string& detail,
           int64_t free, int n = 1) {
  for (RejectionCount& c : *out) {
    if (c.kind == kind && c.detail == detail) {
      c.hosts += n;
      c.largest_free = std::max(c.largest_free, free);
      return;
    }
  }
  out->push_back({kind, detail, n, free});
}

void Sort(std::vector<RejectionCount>* out) {
  std::sort(out->begin(), out->end(), [](const RejectionCount& a, const RejectionCount& b) {
    return std::make_tuple(-a.hosts, a.kind, a.detail) <
           std::make_tuple(-b.hosts, b.kind, b.detail);
  });
}

}  // namespace

HostRejection FirstRejection(const JobRequest& job, const HostView& host) {
  if (!job.pinned_host.empty() && job.pinned_host != host.id) {
    return {Rejection::kPinnedElsewhere, job.pinned_host};
  }
  for (const auto& [key, value] : job.constraints) {  // sorted by key: the first is stable
    auto it = host.labels.find(key);
    if (it == host.labels.end() || it->second != value) {
      return {Rejection::kConstraint, key + "=" + value};
    }
  }
  if (!job.privileged && !host.isolates) return {Rejection::kNotIsolating, ""};
  if (job.bridge && !host.bridge) return {Rejection::kNoBridge, ""};
  if (!host.condition.empty()) {
    return {Rejection::kCondition, host.condition.substr(0, host.condition.find(':'))};
  }
  // A host without totals runs nothing (the plan's HasCapacity): it lacks cpu.
  if (host.cpu_total <= 0 || int64_t{host.cpu_total} - host.cpu_allocated < job.cpu) {
    return {Rejection::kCpu, ""};
  }
  if (host.memory_total <= 0 || !Fits(job, host)) return {Rejection::kMemory, ""};
  if (!job.ports.empty() && !PickPorts(job, host)) return {Rejection::kPorts, ""};
  return {};
}

namespace {

// How many victims PickVictims would stop on `host` alone to make room for
// `job`, 0 when it finds none.
size_t VictimsOn(const JobRequest& job, const HostView& host, const PreemptionView& p) {
  std::vector<RunningJob> here;
  for (const RunningJob& r : p.candidates) {
    if (r.host_id == host.id) here.push_back(r);
  }
  if (here.empty()) return 0;
  auto choice = PickVictims(job, {host}, here, p.may_lose);
  return choice ? choice->victims.size() : 0;
}

}  // namespace

Explanation ExplainJob(const JobRequest& job, const std::vector<HostView>& hosts,
                       const HostCounts& running, const PreemptionView* preemption) {
  Explanation e;
  // The pick is the scheduler's: the plan of this one job.
  const Plan plan = PlanPlacements({job}, hosts, running);
  const HostView* picked = nullptr;
  if (!plan.placements.empty()) {
    e.host = plan.placements[0].host_id;
    e.ports = plan.placements[0].ports;
  } else {
    e.reason = plan.unplaced.at(0).reason;
    e.never_fits = plan.unplaced.at(0).never_fits;
  }
  bool any_warm = false;
  for (const HostView& host : hosts) {
    const HostRejection r = FirstRejection(job, host);
    if (r.kind == Rejection::kNone) {
      ++e.feasible;
      any_warm = any_warm || IsWarm(job, host);
      if (host.id == e.host && !picked) {
        picked = &host;
        continue;
      }
      Count(&e.rejected, Rejection::kRankedLower, "", 0);
      continue;
    }
    if (preemption && (r.kind == Rejection::kCpu || r.kind == Rejection::kMemory)) {
      if (size_t n = VictimsOn(job, host, *preemption); n > 0) {
        Count(&e.rejected, Rejection::kPreemption, std::to_string(n), 0);
        continue;
      }
    }
    int64_t free = 0;
    if (r.kind == Rejection::kCpu) free = std::max<int64_t>(0, int64_t{host.cpu_total} - host.cpu_allocated);
    if (r.kind == Rejection::kMemory) {
      free = std::max<int64_t>(0, int64_t{host.memory_total} - host.memory_allocated);
    }
    Count(&e.rejected, r.kind, r.detail, free);
  }
  if (picked) {
    // The formation's jobs on a host's spread value (0 without a spread).
    auto spread_count = [&](const HostView& host) {
      if (job.spread.empty()) return 0;
      const std::string value = SpreadValueOf(job.spread, host);
      int there = 0;
      for (const HostView& h : hosts) {
        auto it = running.find(h.id);
        if (it != running.end() && SpreadValueOf(job.spread, h) == value) there += it->second;
      }
      return there;
    };
    const int picked_count = spread_count(*picked);
    if (!job.spread.empty()) {
      e.rank.push_back("spread: " + std::to_string(picked_count) + " of its formation's jobs on " +
                       (job.spread == "host" ? "it" : job.spread + "=" + SpreadValueOf(job.spread, *picked)));
    }
    const bool warm = IsWarm(job, *picked);
    if (warm) {
      e.rank.push_back("warm: ran rootfs " + job.rootfs);
    } else if (!job.rootfs.empty()) {
      e.rank.push_back(any_warm ? "cold for rootfs " + job.rootfs + " (the warm hosts spread worse)"
                                : "cold: no feasible host ran rootfs " + job.rootfs);
    }
    // The hosts bin-pack chose among: feasible, tied with it on the terms before.
    int peers = 0;
    for (const HostView& h : hosts) {
      peers += FirstRejection(job, h).kind == Rejection::kNone && IsWarm(job, h) == warm &&
               spread_count(h) == picked_count;
    }
    const std::string full = std::to_string(PercentFullAfter(job, *picked)) + "%";
    e.rank.push_back(peers > 1 ? "bin-pack: fullest of " + std::to_string(peers) +
                                     " after placing (" + full + ")"
                               : "bin-pack: " + full + " full after placing");
  }
  Sort(&e.rejected);
  return e;
}

void AddNotUp(Explanation* e, const std::string& why, int n) {
  if (n <= 0) return;
  Count(&e->rejected, Rejection::kNotUp, why, 0, n);
  Sort(&e->rejected);
}

const char* KindName(Rejection kind) {
  switch (kind) {
    case Rejection::kNone: return "";
    case Rejection::kPinnedElsewhere: return "pinned_elsewhere";
    case Rejection::kConstraint: return "constraint";
    case Rejection::kNotIsolating: return "not_isolating";
    case Rejection::kNoBridge: return "no_bridge";
    case Rejection::kCondition: return "condition";
    case Rejection::kCpu: return "cpu";
    case Rejection::kMemory: return "memory";
    case Rejection::kPorts: return "ports";
    case Rejection::kPreemption: return "preemption";
    case Rejection::kRankedLower: return "ranked_lower";
    case Rejection::kNotUp: return "not_up";
  }
  return "";
}

std::string CountText(const RejectionCount& c) {
  std::string n = std::to_string(c.hosts) + " ";
  switch (c.kind) {
    case Rejection::kNone: return n + "feasible";
    case Rejection::kPinnedElsewhere: return n + "not its pinned host " + c.detail;
    case Rejection::kConstraint: return n + "filtered by constraint " + c.detail;
    case Rejection::kNotIsolating:
      return n + "do not isolate jobs (process driver: privileged jobs only)";
    case Rejection::kNoBridge: return n + "offer no network bridge";
    case Rejection::kCondition: return n + "under condition " + c.detail;
    case Rejection::kCpu:
      return n + "lacked cpu (largest free " + std::to_string(c.largest_free) + "m)";
    case Rejection::kMemory:
      return n + "lacked memory (largest free " + std::to_string(c.largest_free) + " MiB)";
    case Rejection::kPorts: return n + "lacked ports";
    case Rejection::kPreemption:
      return n + "would need preemption of " + c.detail + (c.detail == "1" ? " job" : " jobs");
    case Rejection::kRankedLower: return n + "ranked lower";
    case Rejection::kNotUp: return n + c.detail;
  }
  return n;
}

std::string ExplanationText(const Explanation& e) {
  std::string out;
  if (!e.host.empty()) {
    out = "would place on " + e.host + " (";
    for (size_t i = 0; i < e.rank.size(); ++i) out += (i ? "; " : "") + e.rank[i];
    out += ")";
    const char* sep = " ports ";
    for (const auto& [name, port] : e.ports) {
      out += sep + name + "=" + std::to_string(port);
      sep = ", ";
    }
  } else {
    out = "would not place now: " + e.reason;
  }
  int others = 0;
  for (const RejectionCount& c : e.rejected) others += c.hosts;
  if (others == 0) return out + "\n";
  out += "\nnot on " + std::to_string(others) + (others == 1 ? " host: " : " hosts: ");
  for (size_t i = 0; i < e.rejected.size(); ++i) out += (i ? ", " : "") + CountText(e.rejected[i]);
  return out + "\n";
}

}  // namespace pgfleet::placement
