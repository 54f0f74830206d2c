#pragma once
// Concurrency limits and owner quotas ahead of placement: which of a
// formation's claimed jobs may be placed now, and why the others wait.
// Pure: plain structs in, plain structs out (README.md here).
//
//   claimed jobs (priority order) --> formation max_running --> owner quotas
//                                 --> jobs to plan + reasons for the rest
//
// What must hold: the same rule as pgfleet.assign_jobs, which enforces it
// (this only keeps the pass from planning work the database would refuse,
// so a formation at its limit or an owner at quota does not spin): per
// formation and per owner, the longest prefix in claim order that fits; a
// job that does not fit keeps those behind it waiting too, so a big job at
// the head is never starved by small ones behind it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pgfleet::placement {

// One owner's quota (pgfleet.owner_quotas; nullopt: no limit) and what its
// assigned and running jobs take now.
struct OwnerQuota {
  std::optional<int64_t> max_cpu;     // millicores
  std::optional<int64_t> max_memory;  // MiB
  std::optional<int64_t> max_running;
  int64_t cpu = 0;
  int64_t memory = 0;
  int64_t running = 0;
};

struct Limits {
  std::string formation;
  int max_running = 0;                       // formations.max_running; 0: unlimited
  int64_t live = 0;                          // the formation's jobs assigned or running now
  std::map<std::string, OwnerQuota> owners;  // owners with a quota only
};

struct LimitedJob {
  int64_t id = 0;
  std::string owner;
  int cpu = 0;     // millicores
  int memory = 0;  // MiB
};

struct LimitSplit {
  std::vector<int64_t> kept;               // may be planned now, in claim order
  std::map<int64_t, std::string> waiting;  // job -> why it waits (for jobs.error)
};

// Splits `jobs` (claim order) by `limits`.
LimitSplit ApplyLimits(const std::vector<LimitedJob>& jobs, const Limits& limits);

// The words a job waiting behind a limit gets, e.g.
// "waiting for max_running 2 of formation web" (the same pass after pass, so
// its row is not written again while it waits).
std::string MaxRunningReason(const std::string& formation, int max_running);
// e.g. "owner alice at quota: cpu 2000 of 2000m in use"; "" when `job` fits.
std::string QuotaReason(const std::string& owner, const OwnerQuota& q, const LimitedJob& job);

}  // namespace pgfleet::placement
