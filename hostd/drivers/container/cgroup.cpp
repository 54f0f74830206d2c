// The cgroup hierarchy hostd finds, and each job's cgroup in it: created with
// its limits, joined, signalled and deleted. (What one used: cgroup_usage.cpp.)

#include "hostd/drivers/container/cgroup.h"

#include <fcntl.h>
#include <libcgroup.h>
#include <linux/magic.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>

#include "core/util/mutex.h"
#include "core/util/text.h"

namespace pgfleet::hostd {
namespace {

// libcgroup keeps its mount table behind its own lock, but it reports errors
// through per-thread state and some of its helpers are not documented as
// thread-safe; one lock around our calls costs little next to the mkdir and
// rmdir the kernel does under its global cgroup_mutex anyway.
util::Mutex& LibcgroupMutex() {
  static util::Mutex m;
  return m;
}

std::string CgError(int code) {
  std::string s = cgroup_strerror(code);
  if (code == ECGOTHER) s += std::string(" (") + std::strerror(cgroup_get_last_errno()) + ")";
  return s;
}

struct CgroupDeleter {
  void operator()(cgroup* cg) const { cgroup_free(&cg); }
};
using CgroupPtr = std::unique_ptr<cgroup, CgroupDeleter>;

bool WriteSmallFile(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = write(fd, value.data(), value.size());
  close(fd);
  return n == static_cast<ssize_t>(value.size());
}

bool IsCgroup2(const std::string& mount_point) {
  struct statfs st {};
  return statfs(mount_point.c_str(), &st) == 0 &&
         static_cast<unsigned long>(st.f_type) == CGROUP2_SUPER_MAGIC;
}

bool FileExists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// cgroup v1 cpu.shares for a millicore request: 1024 shares per CPU.
int64_t SharesFor(int millicores) {
  return std::max<int64_t>(2, static_cast<int64_t>(millicores) * 1024 / 1000);
}

constexpr int64_t kCfsPeriodUs = 100000;

int64_t QuotaUsFor(int millicores) {
  // The kernel refuses quotas under 1 ms.
  return std::max<int64_t>(1000, static_cast<int64_t>(millicores) * kCfsPeriodUs / 1000);
}

}  // namespace

const CgroupSystem* CgroupSystem::Get(std::string* why) {
  static CgroupSystem* sys = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    auto* s = new CgroupSystem();
    if (s->Init(&failure)) {
      sys = s;
    } else {
      delete s;
    }
  });
  if (!sys && why) *why = failure;
  return sys;
}

bool CgroupSystem::Init(std::string* why) {
  util::MutexLock lock(LibcgroupMutex());
  int rc = cgroup_init();
  if (rc != 0) {
    *why = "libcgroup cannot initialise: " + CgError(rc);
    return false;
  }
  // Where is each controller? On v1 every one has its own (or a shared)
  // mount point; on a v2-only host they all resolve to the unified mount.
  auto mount_point = [](const char* controller) -> std::string {
    char* mp = nullptr;
    if (cgroup_get_subsys_mount_point(controller, &mp) != 0 || !mp) return {};
    std::string s = mp;
    std::free(mp);
    return s;
  };
  std::string memory = mount_point("memory");
  if (memory.empty()) {
    *why = "cgroup controller memory is not mounted";
    return false;
  }
  unified_ = IsCgroup2(memory);
  controllers_ = unified_ ? std::vector<std::string>{"memory", "cpu", "pids"}
                          : std::vector<std::string>{"memory", "cpu", "cpuacct", "pids"};
  for (const auto& c : controllers_) {
    std::string mp = mount_point(c.c_str());
    if (mp.empty()) {
      *why = "cgroup controller " + c + " is not mounted";
      return false;
    }
    if (IsCgroup2(mp) != unified_) {
      *why = "cgroup controller " + c + " is on " + (unified_ ? "v1" : "v2") +
             " while memory is on " + (unified_ ? "v2" : "v1") +
             "; the container driver needs them in the same version";
      return false;
    }
    if (access(mp.c_str(), W_OK) != 0) {
      *why = "cgroup hierarchy " + mp + " is not writable: " + std::strerror(errno);
      return false;
    }
    mount_points_[c] = mp;
  }
  if (unified_) {
    std::string available = util::ReadFileOrEmpty(mount_points_["memory"] + "/cgroup.controllers");
    for (const auto& c : controllers_) {
      if (available.find(c) == std::string::npos) {
        *why = "cgroup v2 controller " + c + " is not available in " + mount_points_["memory"] +
               "/cgroup.controllers";
        return false;
      }
    }
  }
  // Swap accounting is optional in the kernel (and off on many hosts); limit
  // swap only where the file exists. On v1 it exists at the root too.
  optional_files_["memory/memory.memsw.limit_in_bytes"] =
      FileExists(mount_points_["memory"] + "/memory.memsw.limit_in_bytes");
  return true;
}

std::string CgroupSystem::Dir(const std::string& controller, const std::string& path) const {
  auto it = mount_points_.find(controller);
  if (it == mount_points_.end()) return {};
  return it->second + "/" + path;
}

bool CgroupSystem::HasFile(const std::string& controller, const std::string& file) const {
  auto it = optional_files_.find(controller + "/" + file);
  return it != optional_files_.end() && it->second;
}

namespace {

// On v2 a controller can be used in a group only when every ancestor
// enables it in cgroup.subtree_control; makes that so down to `path`.
void EnableControllersDownTo(const CgroupSystem& sys, const std::string& path) {
  std::string dir = sys.Dir("memory", "");
  dir.pop_back();  // trailing '/'
  size_t start = 0;
  for (;;) {
    WriteSmallFile(dir + "/cgroup.subtree_control", "+memory +cpu +pids");
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) break;
    dir = sys.Dir("memory", path.substr(0, slash));
    mkdir(dir.c_str(), 0755);
    start = slash + 1;
  }
}

// The group `path` with its controllers and the values that enforce
// `limits`, in the files of the system's cgroup version; not created yet.
CgroupPtr DescribeGroup(const CgroupSystem& sys, const std::string& path,
                        const CgroupLimits& limits) {
  CgroupPtr cg(cgroup_new_cgroup(path.c_str()));
  if (!cg) throw std::runtime_error("cgroup " + path + ": libcgroup cannot allocate it");
  auto add = [&](const char* controller) {
    cgroup_controller* c = cgroup_add_controller(cg.get(), controller);
    if (!c) throw std::runtime_error("cgroup " + path + ": cannot add controller " + controller);
    return c;
  };
  auto value = [&](cgroup_controller* c, const char* name, const std::string& v) {
    int rc = cgroup_add_value_string(c, name, v.c_str());
    if (rc != 0) throw std::runtime_error("cgroup " + path + ": " + name + ": " + CgError(rc));
  };

  cgroup_controller* memory = add("memory");
  cgroup_controller* cpu = add("cpu");
  cgroup_controller* pids = add("pids");
  if (!sys.unified()) add("cpuacct");
  if (limits.pids_max > 0) value(pids, "pids.max", std::to_string(limits.pids_max));

  if (sys.unified()) {
    if (limits.memory_bytes > 0) {
      value(memory, "memory.max", std::to_string(limits.memory_bytes));
      value(memory, "memory.swap.max", "0");
    }
    if (limits.cpu_millicores > 0) {
      // The conversion runc and systemd use from v1 shares to v2 weight.
      int64_t weight = 1 + ((SharesFor(limits.cpu_millicores) - 2) * 9999) / 262142;
      value(cpu, "cpu.weight", std::to_string(std::clamp<int64_t>(weight, 1, 10000)));
      if (limits.cpu_hard_limit) {
        value(
            cpu, "cpu.max",
            std::to_string(QuotaUsFor(limits.cpu_millicores)) + " " + std::to_string(kCfsPeriodUs));
      }
    }
    return cg;
  }
  if (limits.memory_bytes > 0) {
    value(memory, "memory.limit_in_bytes", std::to_string(limits.memory_bytes));
    // Written after the memory limit: memsw must never be below it.
    if (sys.HasFile("memory", "memory.memsw.limit_in_bytes")) {
      value(memory, "memory.memsw.limit_in_bytes", std::to_string(limits.memory_bytes));
    }
  }
  if (limits.cpu_millicores > 0) {
    value(cpu, "cpu.shares", std::to_string(SharesFor(limits.cpu_millicores)));
    if (limits.cpu_hard_limit) {
      value(cpu, "cpu.cfs_period_us", std::to_string(kCfsPeriodUs));
      value(cpu, "cpu.cfs_quota_us", std::to_string(QuotaUsFor(limits.cpu_millicores)));
    }
  }
  return cg;
}

}  // namespace

JobCgroup::JobCgroup(const CgroupSystem& sys, std::string path, const CgroupLimits& limits)
    : sys_(sys), path_(std::move(path)) {
  if (sys_.unified()) EnableControllersDownTo(sys_, path_);
  CgroupPtr cg = DescribeGroup(sys_, path_, limits);
  int rc;
  {
    util::MutexLock lock(LibcgroupMutex());
    rc = cgroup_create_cgroup(cg.get(), 0);
  }
  if (rc != 0) {
    std::string err = CgError(rc);
    // A half-made group (some controllers created) must not be left behind.
    Destroy();
    throw std::runtime_error("cannot create cgroup " + path_ + ": " + err);
  }
}

JobCgroup::JobCgroup(const CgroupSystem& sys, std::string path)
    : sys_(sys), path_(std::move(path)) {}

JobCgroup::~JobCgroup() { Destroy(); }

std::string JobCgroup::File(const std::string& controller, const std::string& file) const {
  return sys_.Dir(controller, path_) + "/" + file;
}

void JobCgroup::Attach(pid_t pid) {
  CgroupPtr cg(cgroup_new_cgroup(path_.c_str()));
  if (!cg) throw std::runtime_error("cgroup " + path_ + ": libcgroup cannot allocate it");
  for (const auto& c : sys_.controllers()) {
    if (!cgroup_add_controller(cg.get(), c.c_str())) {
      throw std::runtime_error("cgroup " + path_ + ": cannot add controller " + c);
    }
  }
  int rc;
  {
    util::MutexLock lock(LibcgroupMutex());
    rc = cgroup_attach_task_pid(cg.get(), pid);
  }
  if (rc != 0) {
    throw std::runtime_error("cannot move pid " + std::to_string(pid) + " into cgroup " + path_ +
                             ": " + CgError(rc));
  }
}

std::vector<pid_t> JobCgroup::Procs() const {
  std::vector<pid_t> out;
  if (destroyed_) return out;
  std::string text = util::ReadFileOrEmpty(File("pids", "cgroup.procs"));
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    if (eol > pos) out.push_back(static_cast<pid_t>(std::strtoll(text.c_str() + pos, nullptr, 10)));
    pos = eol + 1;
  }
  return out;
}

int JobCgroup::Signal(int sig) const {
  int n = 0;
  for (pid_t p : Procs()) {
    if (p > 0 && kill(p, sig) == 0) ++n;
  }
  return n;
}

bool JobCgroup::KillAll(int timeout_ms) const {
  if (destroyed_) return true;
  if (sys_.unified() && WriteSmallFile(File("pids", "cgroup.kill"), "1")) {
    // cgroup.kill (Linux 5.14) kills every process, including ones forking
    // right now; wait below until they are gone.
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (int round = 0;; ++round) {
    std::vector<pid_t> procs = Procs();
    if (procs.empty()) return true;
    for (pid_t p : procs) {
      if (p > 0) kill(p, SIGKILL);
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    // Killed processes leave the cgroup when they exit, which takes a moment.
    std::this_thread::sleep_for(std::chrono::microseconds(round < 10 ? 200 : 2000));
  }
}

void JobCgroup::Destroy() {
  if (destroyed_) return;
  if (!KillAll()) {
    spdlog::warn("cgroup={} processes survive SIGKILL; deleting the cgroup anyway", path_);
  }
  CgroupPtr cg(cgroup_new_cgroup(path_.c_str()));
  if (!cg) {
    spdlog::error("cgroup={} cannot allocate a libcgroup handle to delete it", path_);
    return;
  }
  for (const auto& c : sys_.controllers()) cgroup_add_controller(cg.get(), c.c_str());
  // A process that was just killed leaves its cgroup a moment after kill()
  // returns, so rmdir can still see it busy: retry briefly.
  int rc = 0;
  for (int attempt = 0; attempt < 50; ++attempt) {
    {
      util::MutexLock lock(LibcgroupMutex());
      rc = cgroup_delete_cgroup_ext(cg.get(),
                                    CGFLAG_DELETE_RECURSIVE | CGFLAG_DELETE_IGNORE_MIGRATION);
    }
    if (rc == 0 || rc == ECGROUPNOTEXIST) break;
    KillAll(100);
    std::this_thread::sleep_for(std::chrono::milliseconds(attempt < 5 ? 1 : 10));
  }
  if (rc != 0 && rc != ECGROUPNOTEXIST) {
    spdlog::error("cgroup={} cannot be deleted: {}", path_, CgError(rc));
  }
  destroyed_ = true;
}

void DeleteCgroupIfEmpty(const CgroupSystem& sys, const std::string& path) {
  CgroupPtr cg(cgroup_new_cgroup(path.c_str()));
  if (!cg) return;
  for (const auto& c : sys.controllers()) cgroup_add_controller(cg.get(), c.c_str());
  util::MutexLock lock(LibcgroupMutex());
  cgroup_delete_cgroup_ext(cg.get(), CGFLAG_DELETE_EMPTY_ONLY);
}

}  // namespace pgfleet::hostd
