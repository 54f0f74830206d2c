#pragma once
// One job's cgroup for the container driver: created, joined and deleted with
// libcgroup, read and signalled through the cgroup files.
//
// Layout: the same relative path, e.g. "pgfleet/<host>/<job>-<attempt>", is
// created under the root of each hierarchy — memory, cpu, cpuacct and pids on
// cgroup v1 (separate or co-mounted hierarchies), or memory, cpu and pids in
// the one cgroup v2 hierarchy when that is all the host has. The path is
// absolute (from the hierarchy root), not relative to hostd's own cgroup, so
// every job of a host sits in one subtree an operator can find and watch.
//
// Thread safety: CgroupSystem is immutable after Get(). A JobCgroup may be
// used from several threads as long as Destroy() does not race its other
// members (ContainerExecution serialises them).

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pgfleet::hostd {

// What a job's cgroup enforces. Values <= 0 mean "no limit" for that resource.
struct CgroupLimits {
  int64_t memory_bytes = 0;
  int cpu_millicores = 0;       // weight (cpu.shares / cpu.weight)
  bool cpu_hard_limit = false;  // also a CFS quota of cpu_millicores
  int pids_max = 0;
};

// What a job's cgroup measured; read before it is deleted.
struct CgroupUsage {
  int64_t oom_kills = 0;          // memory.oom_control oom_kill / memory.events oom_kill
  int64_t peak_memory_bytes = 0;  // memory.max_usage_in_bytes / memory.peak
  double cpu_seconds = 0;         // cpuacct.usage / cpu.stat usage_usec
};

// What a job's cgroup uses now (live usage, hostd/agent/usage.h).
struct CgroupNow {
  double cpu_seconds = 0;    // cumulative: cpu.stat usage_usec / cpuacct.usage
  int64_t memory_bytes = 0;  // memory.current / memory.usage_in_bytes
};

class CgroupSystem;
// Reads the group at `path` (as JobCgroup names it) without taking it over;
// nullopt when it does not exist (gone, or never made).
std::optional<CgroupNow> ReadCgroupNow(const CgroupSystem& sys, const std::string& path);

// The host's cgroup setup, found once per process.
class CgroupSystem {
 public:
  // Initialises libcgroup (once) and finds the controllers the driver needs.
  // Returns nullptr and sets *why when they are not all usable.
  static const CgroupSystem* Get(std::string* why);

  // True when the controllers live in the unified (v2) hierarchy.
  bool unified() const { return unified_; }
  // Controllers a job cgroup is created in ("memory", "cpu", "cpuacct", "pids" on v1).
  const std::vector<std::string>& controllers() const { return controllers_; }
  // Directory of `path` in the hierarchy holding `controller`.
  std::string Dir(const std::string& controller, const std::string& path) const;
  // Whether `file` (e.g. "memory.memsw.limit_in_bytes") exists for `controller`.
  bool HasFile(const std::string& controller, const std::string& file) const;

 private:
  CgroupSystem() = default;
  bool Init(std::string* why);

  bool unified_ = false;
  std::vector<std::string> controllers_;
  std::map<std::string, std::string> mount_points_;  // controller -> mount point
  std::map<std::string, bool> optional_files_;       // "controller/file" -> exists
};

class JobCgroup {
 public:
  // Creates `path` (from the hierarchy root, no leading '/') in every
  // controller with `limits`, creating missing parents. Throws
  // std::runtime_error naming the path and libcgroup's error.
  JobCgroup(const CgroupSystem& sys, std::string path, const CgroupLimits& limits);
  // Takes over an existing group at `path` (left by a process that is gone),
  // to kill what is in it and delete it.
  JobCgroup(const CgroupSystem& sys, std::string path);
  // Destroy()s the cgroup if that has not been done.
  ~JobCgroup();
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  const std::string& path() const { return path_; }

  // Moves `pid` into the cgroup in every controller. Throws std::runtime_error.
  void Attach(pid_t pid);

  // Processes currently in the cgroup (host pids). Empty once deleted.
  std::vector<pid_t> Procs() const;

  // Sends `sig` to every process in the cgroup; returns how many were signalled.
  int Signal(int sig) const;

  // SIGKILLs every process in the cgroup until none is left (a fork bomb can
  // add processes while the list is being read). Gives up after `timeout_ms`
  // and returns false if processes remain.
  bool KillAll(int timeout_ms = 5000) const;

  // Reads the OOM kill counter, peak memory and CPU time.
  CgroupUsage ReadUsage() const;

  // Kills anything left, then deletes the cgroup in every controller with
  // libcgroup (recursively, so groups a root job made below it go too).
  // Idempotent; logs instead of throwing, since it runs on cleanup paths.
  void Destroy();

 private:
  std::string File(const std::string& controller, const std::string& file) const;

  const CgroupSystem& sys_;
  std::string path_;
  bool destroyed_ = false;
};

// Deletes `path` in every controller if it is empty (no processes, no
// children); used for the per-host parent when a driver goes away.
void DeleteCgroupIfEmpty(const CgroupSystem& sys, const std::string& path);

}  // namespace pgfleet::hostd
