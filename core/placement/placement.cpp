#include "core/placement/placement.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <limits>
#include <optional>
#include <utility>

#include "core/placement/ports.h"

namespace pgfleet::placement {
namespace {

using Constraints = std::map<std::string, std::string>;

constexpr size_t kNoHost = std::numeric_limits<size_t>::max();

// Fullness products multiply four 32-bit quantities, so they need 128 bits.
__extension__ typedef __int128 Wide;

// How full a host is after placing a job: the mean of its cpu and memory
// utilisation fractions, kept as the exact fraction num/den (den > 0, the
// common factor 1/2 dropped). Exact, so equally full hosts really tie and the
// tie goes to the host id rather than to rounding.
struct Fullness {
  Wide num = 0;
  Wide den = 1;
};

bool Fuller(const Fullness& a, const Fullness& b) { return a.num * b.den > b.num * a.den; }

// Requires host.cpu_total > 0 and host.memory_total > 0.
Fullness FullnessAfter(const JobRequest& job, const HostView& host) {
  const Wide cpu_used = Wide{host.cpu_allocated} + job.cpu;
  const Wide memory_used = Wide{host.memory_allocated} + job.memory;
  // cpu_used / cpu_total + memory_used / memory_total over a common denominator.
  return {cpu_used * host.memory_total + memory_used * host.cpu_total,
          Wide{host.cpu_total} * host.memory_total};
}

// A host that advertises no cpu or no memory runs nothing, whatever its
// allocation claims.
bool HasCapacity(const HostView& host) { return host.cpu_total > 0 && host.memory_total > 0; }

bool Satisfies(const Constraints& constraints, const Constraints& labels) {
  for (const auto& [key, value] : constraints) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  return true;
}

// The rule a request breaks, or "" when it is well formed. Requests come from
// validated specs (core/spec), so this only guards the plan's invariants: a
// zero or negative request would let a host's allocation go over its totals.
std::string RequestError(const JobRequest& job) {
  if (job.cpu <= 0) return "cpu must be > 0 (got " + std::to_string(job.cpu) + ")";
  if (job.memory <= 0) return "memory must be > 0 (got " + std::to_string(job.memory) + ")";
  return "";
}

std::string ConstraintsText(const Constraints& constraints) {
  std::string out;
  for (const auto& [key, value] : constraints) {  // std::map: sorted by key
    if (!out.empty()) out += ',';
    out += key + '=' + value;
  }
  return out;
}

// Host indices in id order (then input order), so that scanning in this order
// and keeping only strictly fuller hosts breaks ties by the lower id.
std::vector<size_t> HostsById(const std::vector<HostView>& hosts) {
  std::vector<size_t> order(hosts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return hosts[a].id < hosts[b].id; });
  return order;
}

// Stage 1, feasibility by labels and isolation: the hosts (from `by_id`, in
// that order) whose labels satisfy `constraints` and that may run a job of
// that privilege. Neither changes during a plan, so this is computed once per
// distinct (constraints, privileged), not once per job.
std::vector<size_t> MatchingHosts(const Constraints& constraints, bool privileged,
                                  const std::string& pinned_host, bool bridge,
                                  const std::vector<HostView>& hosts,
                                  const std::vector<size_t>& by_id) {
  std::vector<size_t> out;
  for (size_t i : by_id) {
    if ((privileged || hosts[i].isolates) && Satisfies(constraints, hosts[i].labels) &&
        (pinned_host.empty() || pinned_host == hosts[i].id) && (!bridge || hosts[i].bridge))
      out.push_back(i);
  }
  return out;
}

// Whether `job` has room on host `i` now: cpu, memory and its ports.
bool HasRoom(const JobRequest& job, const std::vector<HostView>& hosts, size_t i,
             const FreePorts& free) {
  return Fits(job, hosts[i]) && (job.ports.empty() || PortsFit(job, hosts[i], free[i]));
}

// Stages 1 and 2, feasibility by room and rank (RanksBefore): the index of
// the host among `matching` that has room for `job` now, warm for its rootfs
// if one is, the fullest after placement among those, or kNoHost.
size_t PickHost(const JobRequest& job, const std::vector<size_t>& matching,
                const std::vector<HostView>& hosts, const FreePorts& free) {
  size_t best = kNoHost;
  bool best_warm = false;
  Fullness best_fullness;
  for (size_t i : matching) {
    const HostView& host = hosts[i];
    if (!HasCapacity(host) || !host.condition.empty() || !HasRoom(job, hosts, i, free)) continue;
    const bool warm = IsWarm(job, host);
    const Fullness fullness = FullnessAfter(job, host);
    if (best == kNoHost || (warm && !best_warm) ||
        (warm == best_warm && Fuller(fullness, best_fullness))) {
      best = i;
      best_warm = warm;
      best_fullness = fullness;
    }
  }
  return best;
}

// A host's value of a spread key: its id for "host", else its label (or "").
const std::string& SpreadValue(const std::string& key, const HostView& host) {
  static const std::string kNone;
  if (key == "host") return host.id;
  auto it = host.labels.find(key);
  return it == host.labels.end() ? kNone : it->second;
}

// The formation's jobs per value of the spread key `key`, over all hosts.
std::map<std::string, int> SpreadCounts(const std::string& key, const std::vector<HostView>& hosts,
                                        const HostCounts& counts) {
  std::map<std::string, int> out;
  for (const HostView& h : hosts) {
    auto it = counts.find(h.id);
    out[SpreadValue(key, h)] += it == counts.end() ? 0 : it->second;
  }
  return out;
}

// Stage 2 for a job with a spread: among `matching` hosts with room, the one
// whose spread value holds the fewest of the formation's jobs, then warm for
// its rootfs, then the fullest after placing it; kNoHost when none has room. One pass over
// the hosts to count, one over the matching ones to rank.
size_t PickSpreadHost(const JobRequest& job, const std::vector<size_t>& matching,
                      const std::vector<HostView>& hosts, const HostCounts& counts,
                      const FreePorts& free) {
  const std::map<std::string, int> by_value = SpreadCounts(job.spread, hosts, counts);
  size_t best = kNoHost;
  int best_count = 0;
  bool best_warm = false;
  Fullness best_fullness;
  for (size_t i : matching) {
    const HostView& host = hosts[i];
    if (!HasCapacity(host) || !host.condition.empty() || !HasRoom(job, hosts, i, free)) continue;
    const int count = by_value.at(SpreadValue(job.spread, host));
    const bool warm = IsWarm(job, host);
    const Fullness fullness = FullnessAfter(job, host);
    if (best == kNoHost || count < best_count ||
        (count == best_count &&
         ((warm && !best_warm) || (warm == best_warm && Fuller(fullness, best_fullness))))) {
      best = i;
      best_count = count;
      best_warm = warm;
      best_fullness = fullness;
    }
  }
  return best;
}

// Why `job` has no host among `hosts`, given the hosts whose labels match it.
Unplaced Explain(const JobRequest& job, const std::vector<size_t>& matching,
                 const std::vector<HostView>& hosts) {
  if (std::string error = RequestError(job); !error.empty()) return {job.id, error, true};
  if (hosts.empty()) return {job.id, "no host is up", true};
  if (!job.pinned_host.empty() && matching.empty()) {
    // Its host is not in the snapshot now (late heartbeat, suspended): it
    // waits for that host; the system formation's reconcile stops it if the
    // host leaves for good (a sysbatch job's cancels it once the host is
    // removed).
    return {job.id, "waiting for its host " + job.pinned_host, false};
  }
  if (matching.empty() && job.bridge &&
      !MatchingHosts(job.constraints, job.privileged, job.pinned_host, false, hosts,
                     HostsById(hosts))
           .empty()) {
    return {job.id,
            "no host offers network bridge" +
                (job.constraints.empty() ? "" : " matching " + ConstraintsText(job.constraints)) +
                " (a host whose CNI plugins or configuration do not work says why in pgfleet "
                "hosts)",
            true};
  }
  if (matching.empty()) {
    bool by_labels = std::any_of(hosts.begin(), hosts.end(), [&](const HostView& h) {
      return Satisfies(job.constraints, h.labels);
    });
    if (by_labels && !job.privileged) {
      return {job.id,
              "no host isolates jobs" +
                  (job.constraints.empty() ? "" : " matching " + ConstraintsText(job.constraints)) +
                  ": process-driver hosts run only privileged jobs (submitters in "
                  "pgfleet_privileged)",
              true};
    }
    return {job.id, "no host matches constraints " + ConstraintsText(job.constraints), true};
  }
  if (!job.ports.empty()) {
    if (std::string never = PortsNeverFit(job, matching, hosts); !never.empty()) {
      return {job.id, never, true};
    }
    // A host with the cpu and memory free now but not the ports: the
    // ports are what it waits for.
    for (size_t i : matching) {
      const HostView& host = hosts[i];
      if (HasCapacity(host) && host.condition.empty() && Fits(job, host) &&
          !PickPorts(job, host)) {
        return {job.id, "waiting for ports: " + PortShortfall(job, host), false};
      }
    }
  }
  int largest_cpu = std::numeric_limits<int>::min();
  int largest_memory = std::numeric_limits<int>::min();
  const HostView* held = nullptr;  // a host big enough, but under a condition
  for (size_t i : matching) {
    const HostView& host = hosts[i];
    if (host.cpu_total >= job.cpu && host.memory_total >= job.memory) {
      if (!host.condition.empty()) {
        if (!held) held = &host;
        continue;
      }
      return {job.id, CapacityReason(job), false};
    }
    largest_cpu = std::max(largest_cpu, host.cpu_total);
    largest_memory = std::max(largest_memory, host.memory_total);
  }
  if (held) {
    return {job.id, "waiting for hosts to recover: host " + held->id + " has " + held->condition,
            false};
  }
  std::string reason;
  if (job.cpu > largest_cpu) {
    reason = "no host has " + std::to_string(job.cpu) + "m cpu; largest has " +
             std::to_string(largest_cpu) + "m";
  }
  if (job.memory > largest_memory) {
    if (!reason.empty()) reason += "; ";
    reason += "no host has " + std::to_string(job.memory) + " MiB memory; largest has " +
              std::to_string(largest_memory);
  }
  if (reason.empty()) {  // enough cpu on one host, enough memory on another
    reason = "no host has both " + std::to_string(job.cpu) + "m cpu and " +
             std::to_string(job.memory) + " MiB memory";
  }
  return {job.id, reason, true};
}

}  // namespace

std::string CapacityReason(const JobRequest& job) {
  return "waiting for capacity: needs " + std::to_string(job.cpu) + "m cpu, " +
         std::to_string(job.memory) + " MiB memory";
}

bool LabelsMatch(const JobRequest& job, const HostView& host) {
  return (job.privileged || host.isolates) && Satisfies(job.constraints, host.labels) &&
         (job.pinned_host.empty() || job.pinned_host == host.id) && (!job.bridge || host.bridge);
}

bool Fits(const JobRequest& job, const HostView& host) {
  // 64-bit so that odd snapshots (negative allocations) cannot overflow.
  return int64_t{host.cpu_total} - host.cpu_allocated >= job.cpu &&
         int64_t{host.memory_total} - host.memory_allocated >= job.memory;
}

bool PlacesBefore(const JobRequest& a, const JobRequest& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.id < b.id;
}

bool PacksTighter(const JobRequest& job, const HostView& a, const HostView& b) {
  const Fullness fa = FullnessAfter(job, a);
  const Fullness fb = FullnessAfter(job, b);
  if (Fuller(fa, fb)) return true;
  if (Fuller(fb, fa)) return false;
  return a.id < b.id;
}

bool IsWarm(const JobRequest& job, const HostView& host) {
  return !job.rootfs.empty() && host.rootfs_warm.count(job.rootfs) > 0;
}

bool RanksBefore(const JobRequest& job, const HostView& a, const HostView& b) {
  const bool wa = IsWarm(job, a);
  if (wa != IsWarm(job, b)) return wa;
  return PacksTighter(job, a, b);
}

bool SpreadsBetter(const JobRequest& job, const HostView& a, const HostView& b,
                   const std::vector<HostView>& hosts, const HostCounts& counts) {
  const auto by_value = SpreadCounts(job.spread, hosts, counts);
  auto count = [&](const HostView& h) {
    auto it = by_value.find(SpreadValue(job.spread, h));
    return it == by_value.end() ? 0 : it->second;  // a host not in `hosts`: none there yet
  };
  const int ca = count(a);
  const int cb = count(b);
  if (ca != cb) return ca < cb;
  return RanksBefore(job, a, b);
}

Unplaced ExplainUnplaced(const JobRequest& job, const std::vector<HostView>& hosts) {
  return Explain(job,
                 MatchingHosts(job.constraints, job.privileged, job.pinned_host, job.bridge, hosts,
                               HostsById(hosts)),
                 hosts);
}

// Stage 3, the plan: jobs in PlacesBefore order, each on PickHost's choice, the
// choice charged to the host at once so later jobs see the room it took.
Plan PlanPlacements(std::vector<JobRequest> jobs, std::vector<HostView> hosts,
                    const HostCounts& running) {
  std::stable_sort(jobs.begin(), jobs.end(), PlacesBefore);
  HostCounts counts = running;  // charged with each placement, for later spread jobs
  const std::vector<size_t> by_id = HostsById(hosts);
  FreePorts free_ports = FreePortsOfAll(hosts);  // charged with each placement
  struct Group {
    std::vector<size_t> matching;
    // The smallest request seen to find no room in this group: room only
    // shrinks during a plan, so a request at least as large in both finds
    // none either, without a look at every host (a claim of like jobs on a
    // full fleet looked at every host once per job).
    std::optional<std::pair<int, int>> no_room;
  };
  // Jobs asking for the same ports share a group: room for them (ports
  // included) only shrinks during a plan, as for cpu and memory.
  std::map<std::tuple<Constraints, bool, std::string, bool, std::map<std::string, int>>, Group>
      groups;

  Plan plan;
  plan.placements.reserve(jobs.size());
  for (const JobRequest& job : jobs) {
    auto [it, inserted] =
        groups.try_emplace({job.constraints, job.privileged, job.pinned_host, job.bridge, job.ports});
    if (inserted)
      it->second.matching = MatchingHosts(job.constraints, job.privileged, job.pinned_host,
                                          job.bridge, hosts, by_id);
    Group& group = it->second;
    const std::vector<size_t>& matching = group.matching;

    size_t best = kNoHost;
    if (RequestError(job).empty() && !(group.no_room && job.cpu >= group.no_room->first &&
                                       job.memory >= group.no_room->second)) {
      best = job.spread.empty() ? PickHost(job, matching, hosts, free_ports)
                                : PickSpreadHost(job, matching, hosts, counts, free_ports);
      if (best == kNoHost &&
          (!group.no_room ||
           (job.cpu <= group.no_room->first && job.memory <= group.no_room->second))) {
        group.no_room = std::make_pair(job.cpu, job.memory);
      }
    }
    if (best == kNoHost) {
      plan.unplaced.push_back(Explain(job, matching, hosts));
      continue;
    }
    HostView& host = hosts[best];
    std::map<std::string, int> ports;
    if (!job.ports.empty()) {
      auto picked = PickPorts(job, host);  // PortsFit said it has them; never trusted blindly
      if (!picked) {
        plan.unplaced.push_back(Explain(job, matching, hosts));
        continue;
      }
      ports = std::move(*picked);
      for (const auto& [name, port] : ports) {
        host.ports_held.insert(port);
        free_ports[best] -= port >= host.port_lo && port <= host.port_hi;
      }
    }
    host.cpu_allocated += job.cpu;
    host.memory_allocated += job.memory;
    ++counts[host.id];
    plan.placements.push_back({job.id, host.id, std::move(ports)});
  }
  return plan;
}

}  // namespace pgfleet::placement
