// The container driver's cgroups: how they are named (under this hostd's
// scope, container.h) and how what shims left is removed.

#include <dirent.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/util/mutex.h"
#include "hostd/drivers/container/cgroup.h"
#include "hostd/drivers/container/container.h"
#include "hostd/drivers/container/container_plan.h"

namespace pgfleet::hostd {
namespace {

using container::RealPath;

std::string CgroupName(const std::string& s) {
  std::string out = s.empty() ? "local" : s;
  for (char& c : out) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return out;
}

util::Mutex g_scope_mu;
std::string g_scope GUARDED_BY(g_scope_mu) = "local";
}  // namespace

std::string CgroupScopeOf(const std::string& data_dir) {
  if (data_dir.empty()) return "local";
  std::string real = RealPath(data_dir);
  if (real.empty()) real = data_dir;
  uint64_t h = 14695981039346656037ULL;  // FNV-1a
  for (unsigned char c : real) h = (h ^ c) * 1099511628211ULL;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

void SetCgroupScope(const std::string& data_dir) {
  util::MutexLock lock(g_scope_mu);
  g_scope = CgroupScopeOf(data_dir);
}

std::string HostCgroupPathFor(const std::string& data_dir, const std::string& host_id) {
  return "pgfleet/" + CgroupScopeOf(data_dir) + "/" + CgroupName(host_id);
}

std::string HostCgroupPath(const std::string& host_id) {
  util::MutexLock lock(g_scope_mu);
  return "pgfleet/" + g_scope + "/" + CgroupName(host_id);
}

std::string ScopeCgroupPath() {
  util::MutexLock lock(g_scope_mu);
  return "pgfleet/" + g_scope;
}

std::string JobCgroupPath(const std::string& host_id, int64_t job_id, int attempt) {
  return HostCgroupPath(host_id) + "/" + std::to_string(job_id) + "-" + std::to_string(attempt);
}

std::optional<CgroupNow> ReadJobCgroupNow(const std::string& host_id, int64_t job_id, int attempt) {
  const CgroupSystem* sys = CgroupSystem::Get(nullptr);
  if (!sys) return {};
  return ReadCgroupNow(*sys, JobCgroupPath(host_id, job_id, attempt));
}

std::vector<std::string> JobCgroupProcsFiles(const std::string& host_id, int64_t job_id,
                                             int attempt) {
  const CgroupSystem* sys = CgroupSystem::Get(nullptr);
  std::vector<std::string> out;
  if (!sys) return out;
  const std::string path = JobCgroupPath(host_id, job_id, attempt);
  for (const auto& c : sys->controllers()) {
    std::string file = sys->Dir(c, path) + "/cgroup.procs";
    // Co-mounted v1 controllers (cpu,cpuacct) share one directory: once each.
    if (std::find(out.begin(), out.end(), file) == out.end()) out.push_back(file);
  }
  return out;
}

int RemoveJobCgroup(const std::string& host_id, int64_t job_id, int attempt) {
  const CgroupSystem* sys = CgroupSystem::Get(nullptr);
  if (!sys) return 0;
  std::string path = JobCgroupPath(host_id, job_id, attempt);
  bool exists = false;
  for (const auto& c : sys->controllers()) {
    struct stat st;
    exists |= stat(sys->Dir(c, path).c_str(), &st) == 0;
  }
  if (!exists) return 0;
  JobCgroup cgroup(*sys, path);
  int left = static_cast<int>(cgroup.Procs().size());
  cgroup.Destroy();
  spdlog::warn("job={} attempt={} its shim is gone and left cgroup {} ({} processes): removed",
               job_id, attempt, path, left);
  return left;
}

int RemoveLeftoverCgroups(const std::string& host_id,
                          const std::function<bool(int64_t job_id, int attempt)>& shim_alive) {
  const CgroupSystem* sys = CgroupSystem::Get(nullptr);
  if (!sys) return 0;
  std::set<std::pair<int64_t, int>> found;
  for (const auto& c : sys->controllers()) {
    DIR* d = opendir(sys->Dir(c, HostCgroupPath(host_id)).c_str());
    if (!d) continue;
    while (dirent* e = readdir(d)) {
      long long job = 0;
      int attempt = 0, used = 0;
      if (e->d_type == DT_DIR && std::sscanf(e->d_name, "%lld-%d%n", &job, &attempt, &used) == 2 &&
          e->d_name[used] == '\0' && job > 0 && attempt > 0) {
        found.emplace(job, attempt);
      }
    }
    closedir(d);
  }
  int removed = 0;
  for (const auto& [job, attempt] : found) {
    if (shim_alive(job, attempt)) continue;
    RemoveJobCgroup(host_id, job, attempt);
    ++removed;
  }
  DeleteCgroupIfEmpty(*sys, HostCgroupPath(host_id));
  DeleteCgroupIfEmpty(*sys, ScopeCgroupPath());
  DeleteCgroupIfEmpty(*sys, "pgfleet");
  return removed;
}

}  // namespace pgfleet::hostd
