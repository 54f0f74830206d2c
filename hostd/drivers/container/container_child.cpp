#include "hostd/drivers/container/container_child.h"
#include "hostd/drivers/container/container_init.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
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
#include <cstring>

extern char** environ;

namespace pgfleet::hostd::container {

namespace {

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

// Every step below runs in the child: async-signal-safe calls only.

void ResetSignals() {
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
}

// The new root with a fresh /proc, a private /tmp and an empty /dev.
void MountRoot(ChildPlan& p) {
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
}

// The /dev entries, hostd's data dir masked, the work dir bound in.
void PopulateRoot(ChildPlan& p) {
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
  for (std::string& mask : p.mask_targets) {
    MkdirP(mask);
    if (mount("tmpfs", mask.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=755,size=16k") != 0) {
      ChildFail(p, kMaskDataDir, errno);
    }
  }
  MkdirP(p.work_target);
  if (!p.disk_device.empty()) {
    // A filesystem of the job's own, its size the job's disk.
    // nodelalloc: a write past the disk fails there and then with ENOSPC,
    // never later at writeback (as an EIO the job cannot place).
    if (mount(p.disk_device.c_str(), p.work_target.c_str(), "ext4", MS_NOSUID | MS_NODEV,
              "nodelalloc") != 0) {
      ChildFail(p, kMountDisk, errno);
    }
  } else if (mount(p.work_source.c_str(), p.work_target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    ChildFail(p, kBindWorkDir, errno);
  }
  // Writable, so neither setuid bits nor device nodes count in it (a bind
  // takes its flags only from a remount).
  if (mount(nullptr, p.work_target.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV,
            nullptr) != 0) {
    ChildFail(p, kBindWorkDir, errno);
  }
  for (size_t i = 0; i < p.etc_targets.size(); ++i) {
    if (mount(p.etc_sources[i].c_str(), p.etc_targets[i].c_str(), nullptr, MS_BIND, nullptr) != 0) {
      ChildFail(p, kBindEtcFile, errno);
    }
  }
}

void EnterRoot(const ChildPlan& p) {
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
}

void RedirectStdioAndAwaitCgroup(const ChildPlan& p) {
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
}

// An unprivileged job's own user namespace, made after everything above was
// set up by the host's root (so the job's mount, PID, UTS, IPC and network
// namespaces stay owned by the host's user namespace, and no capability the
// job holds reaches them). The parent maps its ids, and takes hold of the
// job's disk, and attaches its network namespace (network "bridge"), while
// the child waits here; until then nothing here creates a file.
void EnterUserNamespaceAndPause(const ChildPlan& p) {
  if (!p.userns && p.disk_device.empty() && !p.await_network) return;
  if (p.userns && unshare(CLONE_NEWUSER) != 0) ChildFail(p, kNewUserNamespace, errno);
  ChildReport wanted{kPaused, 0};
  if (send(p.sync_fd, &wanted, sizeof wanted, MSG_NOSIGNAL) != sizeof wanted) _exit(127);
  char mapped = 0;
  ssize_t n;
  do {
    n = recv(p.sync_fd, &mapped, 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n != 1) _exit(127);
}

void DropPrivileges(const ChildPlan& p) {
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
  if (p.seccomp) {  // last: the filter refuses calls the steps above make
    sock_fprog prog{static_cast<unsigned short>(p.seccomp->size()),
                    const_cast<sock_filter*>(p.seccomp->data())};
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) ChildFail(p, kSeccomp, errno);
  }
}

}  // namespace

int ChildMain(void* arg) {
  ChildPlan& p = *static_cast<ChildPlan*>(arg);
  NameInit(p);
  ResetSignals();
  MountRoot(p);
  PopulateRoot(p);
  EnterRoot(p);
  RedirectStdioAndAwaitCgroup(p);
  EnterUserNamespaceAndPause(p);
  DropPrivileges(p);
  umask(022);
  RunInit(p);
}

// Parent side from here on (after the child has reported).
namespace {

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
    case kBindEtcFile:
      return "binding the job's /etc/hostname and /etc/hosts";
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
    case kNewUserNamespace:
      return "making the job's user namespace";
    case kPaused:
      return "mapping the job's ids";
    case kForked:
      return "starting the job";
    case kFork:
      return "forking the job from the container's init";
    case kMountDisk:
      return "mounting the job's disk";
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
    case kSeccomp:
      return "loading the seccomp filter";
    case kExec:
      return "exec";
  }
  return "step " + std::to_string(static_cast<int>(step));
}

}  // namespace

std::string DescribeFailure(const ChildReport& report, const ChildPlan& plan) {
  Step step = static_cast<Step>(report.step);
  std::string what = "container setup failed: " + StepName(step);
  if (step == kBindRoot || step == kReadOnlyRoot) what += " " + plan.root_source;
  if (step == kBindWorkDir) what += " " + plan.work_source;
  if (step == kReadOnlyRoot && report.err == ENOSYS) what += " (needs Linux 5.12+)";
  if (step == kNewUserNamespace && (report.err == ENOSPC || report.err == EPERM)) {
    what += " (see /proc/sys/user/max_user_namespaces)";
  }
  return what + ": " + ErrnoText(report.err);
}

}  // namespace pgfleet::hostd::container
