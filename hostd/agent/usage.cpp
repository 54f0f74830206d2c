#include "hostd/agent/usage.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>

#include "core/util/text.h"
#include "hostd/drivers/container/container.h"

namespace pgfleet::hostd {

namespace {

// /proc/<pid>/stat, after the command name (which may hold spaces and
// parentheses, so it ends at the last ')'): field 3 (state) is [0].
bool ParseStat(const std::string& text, pid_t* pgrp, double* cpu_ticks, double* start_ticks,
               int64_t* rss_pages) {
  size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream in(text.substr(close + 1));
  std::vector<std::string> f;
  std::string w;
  while (f.size() < 22 && in >> w) f.push_back(w);
  if (f.size() < 22) return false;
  *pgrp = static_cast<pid_t>(std::atol(f[2].c_str()));
  *cpu_ticks = std::atof(f[11].c_str()) + std::atof(f[12].c_str()) + std::atof(f[13].c_str()) +
               std::atof(f[14].c_str());
  *start_ticks = std::atof(f[19].c_str());
  *rss_pages = std::atoll(f[21].c_str());
  return true;
}

}  // namespace

std::map<pid_t, GroupCounters> ReadProcessGroups(const std::string& proc) {
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  static const int64_t page = sysconf(_SC_PAGESIZE);
  std::map<pid_t, GroupCounters> out;
  DIR* d = opendir(proc.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    pid_t pgrp = 0;
    double cpu = 0, start = 0;
    int64_t rss = 0;
    // A process may exit between readdir and the read: then it is just not counted.
    if (!ParseStat(util::ReadFileOrEmpty(proc + "/" + e->d_name + "/stat"), &pgrp, &cpu, &start,
                   &rss)) {
      continue;
    }
    GroupCounters& g = out[pgrp];
    g.cpu_seconds += cpu / ticks;
    g.rss_bytes += rss * page;
  }
  closedir(d);
  return out;
}

UsageSampler::UsageSampler(std::string driver, std::string host_id, std::string proc)
    : driver_(CapabilitiesOfDriver(driver)), host_id_(std::move(host_id)), proc_(std::move(proc)) {}

double UsageSampler::StartOf(pid_t pid) const {
  pid_t pgrp = 0;
  double cpu = 0, start = 0;
  int64_t rss = 0;
  if (!ParseStat(util::ReadFileOrEmpty(proc_ + "/" + std::to_string(pid) + "/stat"), &pgrp, &cpu,
                 &start, &rss)) {
    return -1;
  }
  return start / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double UsageSampler::Uptime() const {
  return std::atof(util::ReadFileOrEmpty(proc_ + "/uptime").c_str());
}

std::vector<UsageReading> UsageSampler::Sample(const std::vector<JobInfo>& jobs) {
  std::vector<UsageReading> out;
  std::map<pid_t, GroupCounters> groups;
  if (driver_.runs_processes) groups = ReadProcessGroups(proc_);
  const double now = Uptime();
  std::set<std::pair<int64_t, int>> seen;
  for (const JobInfo& j : jobs) {
    if (j.state != model::AttemptState::kRunning && j.state != model::AttemptState::kStopping) {
      continue;
    }
    UsageReading r{j.job_id, j.attempt, 0, 0};
    if (driver_.runs_processes) {
      if (j.pid <= 0) continue;
      // A container's counters are its cgroup's; a process driver job's,
      // its process group's (the driver makes the job a group leader).
      double cpu = 0;
      if (driver_.has_cgroup) {
        auto c = ReadJobCgroupNow(host_id_, j.job_id, j.attempt);
        if (!c) continue;
        cpu = c->cpu_seconds;
        r.memory_bytes = c->memory_bytes;
      } else {
        auto g = groups.find(j.pid);
        if (g == groups.end()) continue;
        cpu = g->second.cpu_seconds;
        r.memory_bytes = g->second.rss_bytes;
      }
      auto key = std::make_pair(j.job_id, j.attempt);
      auto p = prev_.find(key);
      // The first reading: the average since the job's main process started.
      Prev from = p != prev_.end() ? p->second : Prev{0, StartOf(j.pid)};
      if (from.at >= 0 && now - from.at > 0.05 && cpu >= from.cpu_seconds) {
        r.cpu_cores = (cpu - from.cpu_seconds) / (now - from.at);
      }
      prev_[key] = Prev{cpu, now};
      seen.insert(key);
    }
    out.push_back(r);
  }
  // Forget attempts that stopped running.
  for (auto it = prev_.begin(); it != prev_.end();) {
    it = seen.count(it->first) ? std::next(it) : prev_.erase(it);
  }
  return out;
}

}  // namespace pgfleet::hostd
