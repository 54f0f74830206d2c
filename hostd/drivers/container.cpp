#include "hostd/drivers/container.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "hostd/drivers/cgroup.h"

extern char** environ;

namespace pgfleet::hostd {
namespace {

constexpr const char* kDefaultUser = "nobody";
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr size_t kChildStackSize = 256 * 1024;

// Docker's default capability set: what a job running as root keeps. Enough
// for package managers and daemons that drop privileges; not enough to mount,
// load modules, trace other processes or change the clock.
constexpr uint64_t kRootCapabilities =
    (1ULL << CAP_CHOWN) | (1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_FOWNER) | (1ULL << CAP_FSETID) |
    (1ULL << CAP_KILL) | (1ULL << CAP_SETGID) | (1ULL << CAP_SETUID) | (1ULL << CAP_SETPCAP) |
    (1ULL << CAP_NET_BIND_SERVICE) | (1ULL << CAP_NET_RAW) | (1ULL << CAP_SYS_CHROOT) |
    (1ULL << CAP_MKNOD) | (1ULL << CAP_AUDIT_WRITE) | (1ULL << CAP_SETFCAP);

// Where the child stopped when setting up the container failed. The child
// reports {step, errno}; the parent turns it into the DriverError message.
enum Step : int32_t {
  kPrivateMounts,
  kBindRoot,
  kReadOnlyRoot,
  kMountProc,
  kMountTmp,
  kMountDev,
  kMakeDevice,
  kMaskDataDir,
  kBindWorkDir,
  kPivotRoot,
  kDetachOldRoot,
  kChdirWorkDir,
  kSetHostname,
  kLoopbackUp,
  kRedirectStdio,
  kSetGroups,
  kSetGid,
  kDropBoundingSet,
  kSetUid,
  kSetCapabilities,
  kNoNewPrivs,
  kExec,
};

struct ChildReport {
  int32_t step;
  int32_t err;
};

struct DeviceNode {
  const char* name;
  unsigned major;
  unsigned minor;
};
constexpr DeviceNode kDevices[] = {{"null", 1, 3},   {"zero", 1, 5},    {"full", 1, 7},
                                   {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
constexpr size_t kNumDevices = sizeof(kDevices) / sizeof(kDevices[0]);

// Everything the child needs, computed before clone(): between clone and
// exec the child of a multi-threaded process may only make async-signal-safe
// calls (in practice: plain system calls), so it must not allocate or take
// any lock another thread may have held at clone time. It only reads this
// plan, except that MkdirP edits mask_target and work_target in place (in
// the child's own copy of memory).
struct ChildPlan {
  std::string root_source;  // rootfs directory, or "/" for the host's filesystem
  std::string new_root;     // mount point the container's root is assembled on
  std::string proc_target, tmp_target, dev_target;
  std::string device_targets[kNumDevices];
  std::string fd_link, stdin_link, stdout_link, stderr_link, shm_link;
  std::string tmp_options;
  std::string mask_target;  // hostd's data dir inside the new root; empty = none
  std::string work_source;  // the job dir on the host
  std::string work_target;  // where it is bound inside the new root
  std::string workdir;      // the job's cwd after pivot_root
  std::string hostname;
  bool loopback_up = false;  // new network namespace: bring up lo, as Docker's "none" does

  std::vector<std::string> argv_store, env_store;
  std::vector<char*> argv, envp;

  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  uint64_t keep_caps = 0;
  int cap_last = CAP_LAST_CAP;

  int stdin_fd = -1;
  int log_fd = -1;
  int sync_fd = -1;  // child's end of the socket pair with the parent
};

[[noreturn]] void ChildFail(const ChildPlan& p, Step step, int err) {
  ChildReport r{step, err};
  ssize_t ignored = send(p.sync_fd, &r, sizeof r, MSG_NOSIGNAL);
  (void)ignored;
  _exit(127);
}

// mkdir -p on a string the child owns; errors are left for the mount that
// follows to report.
void MkdirP(std::string& path) {
  char* s = path.data();
  for (char* c = s + 1; *c; ++c) {
    if (*c != '/') continue;
    *c = '\0';
    mkdir(s, 0755);
    *c = '/';
  }
  mkdir(s, 0755);
}

int ChildMain(void* arg) {
  ChildPlan& p = *static_cast<ChildPlan*>(arg);

  // The job must not inherit hostd's signal mask or ignored signals
  // (handlers are reset by exec; SIG_IGN is not).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int s = 1; s < NSIG; ++s) sigaction(s, &dfl, nullptr);  // fails harmlessly for some
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  umask(0);

  // Nothing mounted from here on may propagate back to the host.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    ChildFail(p, kPrivateMounts, errno);
  }
  if (mount(p.root_source.c_str(), p.new_root.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    ChildFail(p, kBindRoot, errno);
  }
  struct mount_attr ro {};
  ro.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  if (syscall(SYS_mount_setattr, AT_FDCWD, p.new_root.c_str(), AT_RECURSIVE, &ro, sizeof ro) != 0) {
    ChildFail(p, kReadOnlyRoot, errno);
  }
  // A fresh /proc shows the job's PID namespace only.
  if (mount("proc", p.proc_target.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) !=
      0) {
    ChildFail(p, kMountProc, errno);
  }
  if (mount("tmpfs", p.tmp_target.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, p.tmp_options.c_str()) !=
      0) {
    ChildFail(p, kMountTmp, errno);
  }
  // A minimal /dev: the usual character devices, no disks, no host ttys.
  if (mount("tmpfs", p.dev_target.c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC,
            "mode=755,size=64k,nr_inodes=64") != 0) {
    ChildFail(p, kMountDev, errno);
  }
  for (size_t i = 0; i < kNumDevices; ++i) {
    if (mknod(p.device_targets[i].c_str(), S_IFCHR | 0666,
              makedev(kDevices[i].major, kDevices[i].minor)) != 0) {
      ChildFail(p, kMakeDevice, errno);
    }
  }
  if (symlink("/proc/self/fd", p.fd_link.c_str()) != 0 ||
      symlink("/proc/self/fd/0", p.stdin_link.c_str()) != 0 ||
      symlink("/proc/self/fd/1", p.stdout_link.c_str()) != 0 ||
      symlink("/proc/self/fd/2", p.stderr_link.c_str()) != 0) {
    ChildFail(p, kMakeDevice, errno);
  }
  // POSIX shared memory lands in the job's private /tmp: the only places a
  // job can write stay its work dir and /tmp.
  if (symlink("/tmp", p.shm_link.c_str()) != 0) ChildFail(p, kMakeDevice, errno);
  if (!p.mask_target.empty()) {
    MkdirP(p.mask_target);
    if (mount("tmpfs", p.mask_target.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=755,size=16k") != 0) {
      ChildFail(p, kMaskDataDir, errno);
    }
  }
  MkdirP(p.work_target);
  if (mount(p.work_source.c_str(), p.work_target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    ChildFail(p, kBindWorkDir, errno);
  }

  // Enter the new root. pivot_root(".", ".") stacks the old root on top of
  // the new one; detaching it leaves the job nothing of the host's tree.
  if (chdir(p.new_root.c_str()) != 0) ChildFail(p, kPivotRoot, errno);
  if (syscall(SYS_pivot_root, ".", ".") != 0) ChildFail(p, kPivotRoot, errno);
  if (umount2(".", MNT_DETACH) != 0) ChildFail(p, kDetachOldRoot, errno);
  if (chdir("/") != 0 || chdir(p.workdir.c_str()) != 0) ChildFail(p, kChdirWorkDir, errno);

  if (sethostname(p.hostname.data(), p.hostname.size()) != 0) ChildFail(p, kSetHostname, errno);

  if (p.loopback_up) {
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, "lo", 3);
    if (sock < 0 || ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) ChildFail(p, kLoopbackUp, errno);
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    if (ioctl(sock, SIOCSIFFLAGS, &ifr) != 0) ChildFail(p, kLoopbackUp, errno);
    close(sock);
  }

  if (dup2(p.stdin_fd, 0) < 0 || dup2(p.log_fd, 1) < 0 || dup2(p.log_fd, 2) < 0) {
    ChildFail(p, kRedirectStdio, errno);
  }

  // Hold here until the parent has put us in the job's cgroup: nothing of
  // the job may run outside its limits. EOF means the parent gave up.
  char go = 0;
  ssize_t n;
  do {
    n = recv(p.sync_fd, &go, 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n != 1) _exit(127);

  // No fd of hostd's may reach the job; the sync socket closes at exec, which
  // is how the parent learns the exec succeeded.
  if (close_range(3, UINT_MAX, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = 3; fd < 65536; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
  }

  // Raw syscalls, not glibc's setgroups/setresgid/setresuid: those broadcast
  // the change to every thread glibc believes exists, and in this child of a
  // multi-threaded process the other threads are gone, so they would wait
  // forever.
  if (syscall(SYS_setgroups, p.groups.size(), p.groups.data()) != 0) {
    ChildFail(p, kSetGroups, errno);
  }
  if (syscall(SYS_setresgid, p.gid, p.gid, p.gid) != 0) ChildFail(p, kSetGid, errno);
  for (int cap = 0; cap <= p.cap_last; ++cap) {
    if (cap < 64 && (p.keep_caps & (1ULL << cap))) continue;
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      ChildFail(p, kDropBoundingSet, errno);
    }
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (syscall(SYS_setresuid, p.uid, p.uid, p.uid) != 0) ChildFail(p, kSetUid, errno);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  data[0].effective = data[0].permitted = static_cast<uint32_t>(p.keep_caps);
  data[1].effective = data[1].permitted = static_cast<uint32_t>(p.keep_caps >> 32);
  if (syscall(SYS_capset, &header, data) != 0) ChildFail(p, kSetCapabilities, errno);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(p, kNoNewPrivs, errno);

  umask(022);
  environ = p.envp.data();  // execvp searches the job's PATH, not hostd's
  execvp(p.argv[0], p.argv.data());
  ChildFail(p, kExec, errno);
}

std::string StepName(Step step) {
  switch (step) {
    case kPrivateMounts:
      return "making mounts private";
    case kBindRoot:
      return "binding the root filesystem";
    case kReadOnlyRoot:
      return "making the root filesystem read-only";
    case kMountProc:
      return "mounting /proc";
    case kMountTmp:
      return "mounting /tmp";
    case kMountDev:
      return "mounting /dev";
    case kMakeDevice:
      return "creating /dev entries";
    case kMaskDataDir:
      return "hiding hostd's data dir";
    case kBindWorkDir:
      return "binding the work dir";
    case kPivotRoot:
      return "pivot_root";
    case kDetachOldRoot:
      return "detaching the old root";
    case kChdirWorkDir:
      return "entering the work dir";
    case kSetHostname:
      return "setting the hostname";
    case kLoopbackUp:
      return "bringing up loopback";
    case kRedirectStdio:
      return "redirecting stdio";
    case kSetGroups:
      return "setgroups";
    case kSetGid:
      return "setgid";
    case kDropBoundingSet:
      return "dropping capabilities";
    case kSetUid:
      return "setuid";
    case kSetCapabilities:
      return "setting capabilities";
    case kNoNewPrivs:
      return "setting no_new_privs";
    case kExec:
      return "exec";
  }
  return "step " + std::to_string(static_cast<int>(step));
}

// An owned file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// Moves fd to a number >= 3 (close-on-exec), so the child's dup2 onto 0..2
// never clobbers another of the fds it needs, even if hostd runs without stdio.
int AboveStdio(int fd) {
  if (fd < 0 || fd >= 3) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return moved;
}

std::string ErrnoText(int err) { return std::strerror(err); }

std::string RealPath(const std::string& path) {
  char* r = realpath(path.c_str(), nullptr);
  if (!r) return {};
  std::string s = r;
  std::free(r);
  return s;
}

bool AllDigits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// Resolves spec.user against the host's user database (before any pivot:
// the job's rootfs may have no passwd at all, and must not choose our uids).
void ResolveUser(const std::string& requested, ChildPlan* plan) {
  std::string user = requested.empty() ? kDefaultUser : requested;
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  std::string uid_part = user, gid_part;
  if (size_t colon = user.find(':'); colon != std::string::npos) {
    uid_part = user.substr(0, colon);
    gid_part = user.substr(colon + 1);
    if (!AllDigits(uid_part) || !AllDigits(gid_part)) {
      throw DriverError("user must be a name or uid[:gid] (got \"" + user + "\")");
    }
  }
  if (AllDigits(uid_part)) {
    plan->uid = static_cast<uid_t>(std::stoul(uid_part));
    getpwuid_r(plan->uid, &pw, buf.data(), buf.size(), &found);
    plan->gid = !gid_part.empty() ? static_cast<gid_t>(std::stoul(gid_part))
                : found           ? found->pw_gid
                                  : static_cast<gid_t>(plan->uid);
    plan->groups = {plan->gid};
  } else {
    int rc = getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
    if (!found) {
      throw DriverError("user \"" + user + "\" does not exist on host" +
                        (rc ? ": " + ErrnoText(rc) : std::string()));
    }
    plan->uid = found->pw_uid;
    plan->gid = found->pw_gid;
    int n = 32;
    std::vector<gid_t> groups(n);
    while (getgrouplist(user.c_str(), plan->gid, groups.data(), &n) < 0) groups.resize(n);
    groups.resize(n);
    plan->groups = groups;
  }
  plan->keep_caps = plan->uid == 0 ? kRootCapabilities : 0;
}

int KernelCapLast() {
  int v = CAP_LAST_CAP;
  Fd fd(open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC));
  char buf[16] = {};
  if (fd.get() >= 0 && read(fd.get(), buf, sizeof buf - 1) > 0) v = std::atoi(buf);
  return v > 0 ? v : CAP_LAST_CAP;
}

std::string CgroupName(const std::string& s) {
  std::string out = s.empty() ? "local" : s;
  for (char& c : out) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return out;
}

class ContainerExecution : public Execution {
 public:
  ContainerExecution(pid_t pid, std::unique_ptr<JobCgroup> cgroup, int memory_mib, std::string ids)
      : pid_(pid), cgroup_(std::move(cgroup)), memory_mib_(memory_mib), ids_(std::move(ids)) {}

  ~ContainerExecution() override {
    if (!waited_) {
      Signal(SIGKILL);
      Wait();
    }
  }

  pid_t pid() const override { return pid_; }

  ExitStatus Wait() override {
    int status = 0;
    pid_t r;
    do {
      r = waitpid(pid_, &status, 0);
    } while (r < 0 && errno == EINTR);
    int wait_errno = errno;

    std::lock_guard<std::mutex> lock(mu_);
    waited_ = true;
    ExitStatus s;
    if (r == pid_) {
      if (WIFEXITED(status)) s.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) s.signal = WTERMSIG(status);
    } else {
      s.error = "lost the job's exit status: waitpid: " + ErrnoText(wait_errno);
    }
    // PID 1 is gone, so the kernel has killed the rest of its PID namespace;
    // read the counters before the cgroup (and them) go away.
    CgroupUsage u = cgroup_->ReadUsage();
    cgroup_->Destroy();
    s.oom_killed = u.oom_kills > 0;
    s.peak_memory_bytes = u.peak_memory_bytes;
    s.cpu_seconds = u.cpu_seconds;
    if (s.oom_killed) s.error = "out of memory (limit " + std::to_string(memory_mib_) + " MiB)";
    spdlog::debug("{} container exited code={} signal={} oom={} peak={} cpu={:.3f}s", ids_,
                  s.exit_code, s.signal, s.oom_killed, s.peak_memory_bytes, s.cpu_seconds);
    return s;
  }

  void Signal(int sig) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (waited_) return;
    if (sig == SIGKILL) {
      if (!cgroup_->KillAll()) spdlog::warn("{} processes survive SIGKILL", ids_);
    } else {
      cgroup_->Signal(sig);
    }
  }

 private:
  const pid_t pid_;
  std::unique_ptr<JobCgroup> cgroup_;
  const int memory_mib_;
  const std::string ids_;
  std::mutex mu_;
  bool waited_ = false;
};

class ContainerDriver : public Driver {
 public:
  ContainerDriver(const CgroupSystem& sys, const DriverOptions& opts, std::string data_dir,
                  std::string staging_root)
      : sys_(sys),
        opts_(opts),
        data_dir_(std::move(data_dir)),
        staging_root_(std::move(staging_root)),
        cap_last_(KernelCapLast()) {}

  ~ContainerDriver() override {
    // Leave no empty per-host group behind; busy ones stay.
    std::string host = "pgfleet/" + CgroupName(opts_.host_id);
    DeleteCgroupIfEmpty(sys_, host);
    DeleteCgroupIfEmpty(sys_, "pgfleet");
  }

  std::string name() const override { return "container"; }

  std::unique_ptr<Execution> Start(const RunRequest& req) override;

 private:
  std::string ResolveRootfs(const std::string& rootfs) const;

  const CgroupSystem& sys_;
  const DriverOptions opts_;
  const std::string data_dir_;      // realpath of opts.data_dir ("" when unset)
  const std::string staging_root_;  // empty dir the host-fs root is assembled on
  const int cap_last_;
};

std::string ContainerDriver::ResolveRootfs(const std::string& rootfs) const {
  std::string path = rootfs;
  if (rootfs.find('/') == std::string::npos) {
    if (data_dir_.empty()) {
      throw DriverError("rootfs \"" + rootfs + "\" is a name but hostd has no data dir");
    }
    path = data_dir_ + "/rootfs/" + rootfs;
  }
  std::string real = RealPath(path);
  struct stat st {};
  if (real.empty() || stat(real.c_str(), &st) != 0) {
    throw DriverError("rootfs \"" + rootfs + "\" not found: " + path + ": " + ErrnoText(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw DriverError("rootfs \"" + rootfs + "\" is not a directory: " + real);
  }
  if (real == "/")
    throw DriverError("rootfs \"" + rootfs + "\" is the host's root; leave rootfs empty");
  return real;
}

std::unique_ptr<Execution> ContainerDriver::Start(const RunRequest& req) {
  const model::JobSpec& spec = req.spec;
  const std::string ids = "job=" + std::to_string(req.job_id) +
                          " attempt=" + std::to_string(req.attempt) +
                          " host=" + (req.host_id.empty() ? opts_.host_id : req.host_id);
  if (spec.command.empty() || spec.command[0].empty()) {
    throw DriverError("command must not be empty");
  }
  bool new_net = false;
  if (spec.network == "none") {
    new_net = true;
  } else if (!spec.network.empty() && spec.network != "host") {
    throw DriverError("network must be \"host\" or \"none\" (got \"" + spec.network + "\")");
  }

  ChildPlan p;
  ResolveUser(spec.user, &p);
  p.cap_last = cap_last_;

  p.work_source = RealPath(req.job_dir);
  struct stat st {};
  if (p.work_source.empty() || stat(p.work_source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw DriverError("job dir " + req.job_dir + " is missing: " + ErrnoText(errno));
  }
  if (p.uid != 0 && (st.st_uid != p.uid || st.st_gid != p.gid) &&
      chown(p.work_source.c_str(), p.uid, p.gid) != 0) {
    throw DriverError("cannot give job dir " + p.work_source + " to uid " + std::to_string(p.uid) +
                      ": " + ErrnoText(errno));
  }

  if (spec.rootfs.empty()) {
    // The host's filesystem, read-only, assembled on an empty staging dir.
    p.root_source = "/";
    p.new_root = staging_root_;
    p.work_target = p.new_root + p.work_source;
    p.workdir = p.work_source;
    if (!data_dir_.empty() && data_dir_ != "/") p.mask_target = p.new_root + data_dir_;
  } else {
    p.root_source = ResolveRootfs(spec.rootfs);
    p.new_root = p.root_source;  // bound onto itself: it becomes a mount point
    for (const char* d : {"/proc", "/tmp", "/dev", "/work"}) {
      mkdir((p.new_root + d).c_str(), 0755);  // make-rootfs has them; a bare tree may not
    }
    p.work_target = p.new_root + "/work";
    p.workdir = "/work";
  }
  p.proc_target = p.new_root + "/proc";
  p.tmp_target = p.new_root + "/tmp";
  p.dev_target = p.new_root + "/dev";
  for (size_t i = 0; i < kNumDevices; ++i) {
    p.device_targets[i] = p.dev_target + "/" + kDevices[i].name;
  }
  p.fd_link = p.dev_target + "/fd";
  p.stdin_link = p.dev_target + "/stdin";
  p.stdout_link = p.dev_target + "/stdout";
  p.stderr_link = p.dev_target + "/stderr";
  p.shm_link = p.dev_target + "/shm";
  // tmpfs pages are charged to the job's memory cgroup anyway; the size cap
  // just gives a clear ENOSPC instead of an OOM kill for a runaway writer.
  p.tmp_options = "mode=1777,size=" + std::to_string(spec.memory) + "m";
  p.hostname = std::to_string(req.job_id);
  p.loopback_up = new_net;

  p.argv_store = spec.command;
  for (auto& a : p.argv_store) p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  bool has_path = false;
  for (const auto& [k, v] : spec.env) {
    if (k == "PATH") has_path = true;
    p.env_store.push_back(k + "=" + v);
  }
  if (!has_path) p.env_store.push_back(std::string("PATH=") + kDefaultPath);
  for (auto& e : p.env_store) p.envp.push_back(e.data());
  p.envp.push_back(nullptr);

  Fd log(AboveStdio(open(req.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640)));
  if (log.get() < 0) {
    throw DriverError("cannot open log file " + req.log_path + ": " + ErrnoText(errno));
  }
  Fd null(AboveStdio(open("/dev/null", O_RDONLY | O_CLOEXEC)));
  if (null.get() < 0) throw DriverError("cannot open /dev/null: " + ErrnoText(errno));
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    throw DriverError("socketpair: " + ErrnoText(errno));
  }
  Fd parent_end(AboveStdio(sv[0]));
  Fd child_end(AboveStdio(sv[1]));
  p.log_fd = log.get();
  p.stdin_fd = null.get();
  p.sync_fd = child_end.get();

  int flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | SIGCHLD;
  if (new_net) flags |= CLONE_NEWNET;
  // The child runs on its own copy of this buffer (no CLONE_VM), so it can be
  // freed as soon as clone() returns here.
  std::unique_ptr<char[]> stack(new char[kChildStackSize]);
  pid_t pid = clone(ChildMain, stack.get() + kChildStackSize, flags, &p);
  if (pid < 0) throw DriverError("clone: " + ErrnoText(errno));
  stack.reset();
  child_end.reset();
  log.reset();
  null.reset();

  auto reap = [pid] {
    kill(pid, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  };

  const std::string cgroup_path =
      "pgfleet/" + CgroupName(req.host_id.empty() ? opts_.host_id : req.host_id) + "/" +
      std::to_string(req.job_id) + "-" + std::to_string(req.attempt);
  CgroupLimits limits;
  limits.memory_bytes = static_cast<int64_t>(spec.memory) << 20;
  limits.cpu_millicores = spec.cpu;
  limits.cpu_hard_limit = spec.cpu_hard_limit;
  limits.pids_max = spec.pids_max > 0 ? spec.pids_max : model::kDefaultPidsMax;
  std::unique_ptr<JobCgroup> cgroup;
  try {
    cgroup = std::make_unique<JobCgroup>(sys_, cgroup_path, limits);
    cgroup->Attach(pid);
  } catch (const std::exception& e) {
    reap();
    cgroup.reset();
    throw DriverError(e.what());
  }

  // Release the child, then learn how its exec went: EOF (the socket closed
  // on exec) means it is running the job; a report means setup failed.
  char go = 'g';
  send(parent_end.get(), &go, 1, MSG_NOSIGNAL);
  ChildReport report{};
  size_t got = 0;
  while (got < sizeof report) {
    ssize_t n =
        recv(parent_end.get(), reinterpret_cast<char*>(&report) + got, sizeof report - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got != 0) {
    reap();
    cgroup.reset();
    if (got != sizeof report) throw DriverError("container setup failed: short report from child");
    Step step = static_cast<Step>(report.step);
    if (step == kExec) {
      throw DriverError("exec \"" + spec.command[0] + "\": " + ErrnoText(report.err));
    }
    std::string what = "container setup failed: " + StepName(step);
    if (step == kBindRoot || step == kReadOnlyRoot) what += " " + p.root_source;
    if (step == kBindWorkDir) what += " " + p.work_source;
    if (step == kReadOnlyRoot && report.err == ENOSYS) what += " (needs Linux 5.12+)";
    throw DriverError(what + ": " + ErrnoText(report.err));
  }
  spdlog::debug("{} container started pid={} cgroup={}", ids, pid, cgroup_path);
  return std::make_unique<ContainerExecution>(pid, std::move(cgroup), spec.memory, ids);
}

}  // namespace

bool ContainerDriverAvailable(std::string* why) {
  std::string reason;
  if (geteuid() != 0) {
    reason = "not running as root (euid " + std::to_string(geteuid()) + ")";
  } else if (!CgroupSystem::Get(&reason)) {
    // reason set by Get()
  }
  if (reason.empty()) return true;
  if (why) *why = reason;
  return false;
}

std::unique_ptr<Driver> MakeContainerDriver(const DriverOptions& opts) {
  std::string why;
  if (!ContainerDriverAvailable(&why)) throw DriverError("container driver unavailable: " + why);
  const CgroupSystem* sys = CgroupSystem::Get(nullptr);

  // The host-filesystem root of jobs without a rootfs is assembled on an
  // empty directory; any mounts on it exist only in each job's namespace.
  std::string base = opts.data_dir.empty() ? "/run/pgfleet-hostd" : opts.data_dir;
  std::error_code ec;
  std::filesystem::create_directories(base + "/container-root", ec);
  if (ec) {
    throw DriverError("cannot create " + base + "/container-root: " + ec.message());
  }
  std::string data_dir = opts.data_dir.empty() ? std::string() : RealPath(opts.data_dir);
  std::string staging = RealPath(base + "/container-root");
  return std::make_unique<ContainerDriver>(*sys, opts, data_dir, staging);
}

}  // namespace pgfleet::hostd
