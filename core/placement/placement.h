#pragma once
// The pure placement core: given pending jobs and a snapshot of hosts, decide
// which job goes where. No database, no clock, no I/O (see README.md here).
//
//   jobs (priority order) --> feasibility (fits? labels match?)
//                         --> rank (spread, then warm rootfs, then bin-pack)
//                         --> plan (placements + reasons for the unplaced)
// explain.h says the same for one job host by host (pgfleet plan).

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pgfleet::placement {

struct HostView {
  std::string id;
  int cpu_total = 0;     // millicores
  int memory_total = 0;  // MiB
  int cpu_allocated = 0;
  int memory_allocated = 0;
  std::map<std::string, std::string> labels;
  // False for a host whose driver runs jobs without isolation (the process
  // driver): it takes only privileged jobs (docs/security.md).
  bool isolates = true;
  // Non-empty while the host reports a condition that stops new work, e.g.
  // "disk pressure: ...": it keeps its jobs but gets no new ones.
  std::string condition;
  // Whether it offers network bridge (hosts.networks): its CNI plugins work.
  bool bridge = false;
  // The ports jobs may be given (hosts.port_range, inclusive; port_hi <
  // port_lo: none) and those held now (pgfleet.job_ports).
  int port_lo = 0;
  int port_hi = -1;
  std::set<int> ports_held;
  // The root filesystems it ran recently (hosts.rootfs_warm, reported by
  // hostd): a job naming one of them ranks this host first among the
  // feasible ones of equal spread (RanksBefore).
  std::set<std::string> rootfs_warm;
};

struct JobRequest {
  int64_t id = 0;
  int cpu = 0;     // millicores
  int memory = 0;  // MiB
  int priority = 50;
  std::map<std::string, std::string> constraints;  // all must equal the host's labels
  bool privileged = false;  // its submitter was privileged: it may run on any host
  // How its formation's jobs share hosts: "" packs them (the bin-pack rank);
  // "host" spreads them one per host before any host gets a second; any
  // other value is a host label key, and they spread over its values (hosts
  // without the label share the value "") as evenly as capacity allows.
  std::string spread;
  // A system formation's replica or a sysbatch formation's job: the one host
  // it may run on ("": any).
  std::string pinned_host;
  // Only a host that offers network bridge runs a bridge job.
  bool bridge = false;
  // Named ports (jobs.ports): 0 = any free port of the host's range, N =
  // host port N (inside the range unless privileged). All on one host.
  std::map<std::string, int> ports;
  // Its root filesystem (jobs.rootfs; "": the host's): hosts that ran it
  // recently rank first (warm-host affinity).
  std::string rootfs;
};

// How many of the formation's jobs each host already runs (host id -> count):
// where a spread starts from.
using HostCounts = std::map<std::string, int>;

struct Placement {
  int64_t job_id = 0;
  std::string host_id;
  // The host ports given for the job's named ports (name -> port).
  std::map<std::string, int> ports;
};

struct Unplaced {
  int64_t job_id = 0;
  // Why, in words an operator understands, e.g.
  // "no host has 100000 MiB memory; largest has 7980",
  // "no host matches constraints zone=b",
  // "waiting for capacity: needs 500m cpu, 64 MiB memory".
  std::string reason;
  // True when no host of the snapshot could ever run it, even empty.
  bool never_fits = false;
};

struct Plan {
  std::vector<Placement> placements;
  std::vector<Unplaced> unplaced;
};

// True when the host's labels satisfy every constraint of the job, the host
// isolates jobs or the job is privileged, and the job is pinned to no other
// host.
bool LabelsMatch(const JobRequest& job, const HostView& host);

// True when the host has the free cpu and memory for the job right now.
bool Fits(const JobRequest& job, const HostView& host);

// The host ports `job` would get on `host` now: each named number as asked
// (if free, and inside the range unless the job is privileged), each 0 the
// lowest free port of the range not taken by another; nullopt when one is
// not to be had. Empty for a job without ports.
std::optional<std::map<std::string, int>> PickPorts(const JobRequest& job, const HostView& host);

// The plan's order: true when `a` is considered before `b` (higher priority
// first, then lower id first).
bool PlacesBefore(const JobRequest& a, const JobRequest& b);

// The bin-pack rank: true when placing `job` on `a` leaves `a` fuller than
// placing it on `b` leaves `b`, by the mean of the cpu and memory utilisation
// fractions after placement, compared exactly; equal fullness goes to the lower
// host id. Both hosts must have cpu_total > 0 and memory_total > 0.
bool PacksTighter(const JobRequest& job, const HostView& a, const HostView& b);

// True when `host` ran `job`'s root filesystem recently (never for a job
// without one).
bool IsWarm(const JobRequest& job, const HostView& host);

// The rank among feasible hosts of a job without a spread: a host warm for
// its rootfs (IsWarm) before a cold one, then PacksTighter. Warmth never
// makes a host feasible and never reorders jobs: it only picks among the
// hosts that already have room, for the job whose turn it is.
bool RanksBefore(const JobRequest& job, const HostView& a, const HostView& b);

// The reason of a job that would fit an empty matching host but none now:
// "waiting for capacity: needs 500m cpu, 64 MiB memory".
std::string CapacityReason(const JobRequest& job);

// Why `job` cannot be placed on any of `hosts` as they are now (see Unplaced).
// Also used by PlanPlacements, so the reasons here are the reasons in a plan.
Unplaced ExplainUnplaced(const JobRequest& job, const std::vector<HostView>& hosts);

// The spread rank of a job with a spread: true when placing it on `a` leaves
// its spread more even than on `b` (fewer of the formation's jobs on a's
// spread value, counted from `counts`), then RanksBefore (warm, then
// fuller): warmth picks among equally spread hosts, never against the spread.
bool SpreadsBetter(const JobRequest& job, const HostView& a, const HostView& b,
                   const std::vector<HostView>& hosts, const HostCounts& counts);

// Places jobs in order of priority (higher first, then lower id first), each on
// the feasible host RanksBefore puts first (warm for its rootfs, then fullest
// after placing it: bin-packing), or for a
// job with a spread on the feasible host its spread ranks first (`running`:
// the formation's jobs already on each host), updating the in-memory
// allocation and counts as it goes so one plan never overcommits a host.
// Every job ends in exactly one of plan.placements or plan.unplaced.
Plan PlanPlacements(std::vector<JobRequest> jobs, std::vector<HostView> hosts,
                    const HostCounts& running = {});

}  // namespace pgfleet::placement
