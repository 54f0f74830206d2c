#pragma once
// Live usage of a host's running attempts (hostd --usage-interval): CPU in
// cores and memory in bytes, measured by hostd from outside each job, so
// shims need not help: the attempt's cgroup (container driver) or its
// process group in /proc (process driver). The agent sends one batch per
// host with a heartbeat (pgfleet.record_usage): no extra round trip, and
// rows of an unlogged table rather than updates of jobs.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hostd/supervisor/supervisor.h"

namespace pgfleet::hostd {

struct UsageReading {
  int64_t job = 0;
  int attempt = 0;
  double cpu_cores = 0;  // over the time since the previous reading (the first: since start)
  int64_t memory_bytes = 0;
};

// One process group's counters, summed over its processes now in /proc.
struct GroupCounters {
  double cpu_seconds = 0;  // utime + stime + cutime + cstime
  int64_t rss_bytes = 0;   // resident set (shared pages count once per process)
};

// Every process group in `proc` (a /proc-like tree), by group id.
std::map<pid_t, GroupCounters> ReadProcessGroups(const std::string& proc = "/proc");

class UsageSampler {
 public:
  // driver: "process", "container" or "sim" (a sim job runs nothing: zeros).
  UsageSampler(std::string driver, std::string host_id, std::string proc = "/proc");
  // One reading for each attempt in `jobs` that is running with a pid and
  // can be measured. Remembers each attempt's counters for its next rate.
  std::vector<UsageReading> Sample(const std::vector<JobInfo>& jobs);

 private:
  struct Prev {
    double cpu_seconds = 0;
    double at = 0;  // seconds after boot
  };
  double Uptime() const;
  // When process pid started, in seconds after boot; -1 if it is gone.
  double StartOf(pid_t pid) const;

  const model::DriverCapabilities driver_;
  std::string host_id_, proc_;
  std::map<std::pair<int64_t, int>, Prev> prev_;
};

}  // namespace pgfleet::hostd
