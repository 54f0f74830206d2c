#include "hostd/drivers/container/container.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

#include "core/util/mutex.h"
#include "hostd/drivers/container/cgroup.h"
#include "hostd/drivers/container/container_child.h"
#include "hostd/drivers/container/container_disk.h"
#include "hostd/drivers/job_files_writer.h"
#include "hostd/drivers/container/container_execution.h"
#include "hostd/drivers/container/container_plan.h"
#include "hostd/network/attachment.h"

namespace pgfleet::hostd {
namespace {

using container::ChildPlan;
using container::ErrnoText;
using container::RealPath;

constexpr size_t kChildStackSize = 256 * 1024;

// An owned file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
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

int KernelCapLast() {
  int v = CAP_LAST_CAP;
  Fd fd(open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC));
  char buf[16] = {};
  if (fd.get() >= 0 && read(fd.get(), buf, sizeof buf - 1) > 0) v = std::atoi(buf);
  return v > 0 ? v : CAP_LAST_CAP;
}

class ContainerDriver : public Driver {
 public:
  ContainerDriver(const CgroupSystem& sys, const DriverOptions& opts, std::string data_dir,
                  std::string staging_root)
      : sys_(sys),
        opts_(opts),
        network_scope_(CgroupScopeOf(opts.data_dir)),
        context_{std::move(data_dir), opts.job_ids, std::move(staging_root), KernelCapLast()} {}

  ~ContainerDriver() override {
    // Leave no empty per-host group behind; busy ones stay.
    DeleteCgroupIfEmpty(sys_, HostCgroupPath(opts_.host_id));
    DeleteCgroupIfEmpty(sys_, ScopeCgroupPath());
    DeleteCgroupIfEmpty(sys_, "pgfleet");
  }

  std::string name() const override { return "container"; }

  std::unique_ptr<Execution> Start(const RunRequest& req) override;

 private:
  // The descriptors the child keeps until exec (plan.log_fd, stdin_fd, sync_fd).
  struct ChildFds {
    Fd log, null, parent_end, child_end, status_read, status_write;
  };
  static void OpenChildFds(const RunRequest& req, ChildPlan* plan, ChildFds* fds);
  std::unique_ptr<JobCgroup> MakeCgroup(const RunRequest& req, pid_t pid) const;
  // Releases the child and learns how its exec went; returns the job's pid
  // (the child's, when the job's process never said). Network "bridge": the
  // paused child's namespace is attached (*net) before it may go on.
  pid_t AwaitExec(int parent_end, pid_t pid, const ChildPlan& plan, const RunRequest& req,
                  container::JobDisk* disk, std::optional<network::Attachment>* net) const;

  const CgroupSystem& sys_;
  const DriverOptions opts_;
  const std::string network_scope_;  // container IDs' (network/attachment.h)
  const container::PlanContext context_;
};

void ContainerDriver::OpenChildFds(const RunRequest& req, ChildPlan* plan, ChildFds* fds) {
  fds->log.reset(OpenJobOutput(req, 0640));
  if (fds->log.get() < 0) {
    throw DriverError("cannot open log file " + req.log_path + ": " + ErrnoText(errno));
  }
  fds->null.reset(AboveStdio(open("/dev/null", O_RDONLY | O_CLOEXEC)));
  if (fds->null.get() < 0) throw DriverError("cannot open /dev/null: " + ErrnoText(errno));
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    throw DriverError("socketpair: " + ErrnoText(errno));
  }
  fds->parent_end.reset(AboveStdio(sv[0]));
  fds->child_end.reset(AboveStdio(sv[1]));
  // The job's process says it forked (container::kForked): its pid, as this
  // process sees it, comes with the message.
  int on = 1;
  if (setsockopt(fds->parent_end.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
    throw DriverError("SO_PASSCRED: " + ErrnoText(errno));
  }
  int status[2];
  if (pipe2(status, O_CLOEXEC) != 0) throw DriverError("pipe: " + ErrnoText(errno));
  fds->status_read.reset(AboveStdio(status[0]));
  fds->status_write.reset(AboveStdio(status[1]));
  plan->log_fd = fds->log.get();
  plan->stdin_fd = fds->null.get();
  plan->sync_fd = fds->child_end.get();
  plan->status_fd = fds->status_write.get();
}

std::unique_ptr<JobCgroup> ContainerDriver::MakeCgroup(const RunRequest& req, pid_t pid) const {
  const std::string path =
      JobCgroupPath(req.host_id.empty() ? opts_.host_id : req.host_id, req.job_id, req.attempt);
  CgroupLimits limits;
  limits.memory_bytes = static_cast<int64_t>(req.spec.memory) << 20;
  limits.cpu_millicores = req.spec.cpu;
  limits.cpu_hard_limit = req.spec.cpu_hard_limit;
  limits.pids_max = req.spec.pids_max > 0 ? req.spec.pids_max : model::kDefaultPidsMax;
  auto cgroup = std::make_unique<JobCgroup>(sys_, path, limits);
  cgroup->Attach(pid);
  return cgroup;
}

// Maps the user namespace the child `pid` just made: ids 0..count-1 inside
// are range.start.. on the host, for uids and gids. Written by this process
// (root in the parent namespace), so setgroups stays allowed inside.
void WriteIdMaps(pid_t pid, const JobIdRange& range) {
  const std::string line = "0 " + std::to_string(range.start) + " " + std::to_string(range.count) +
                           "\n";
  for (const char* map : {"uid_map", "gid_map"}) {
    const std::string path = "/proc/" + std::to_string(pid) + "/" + map;
    Fd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (fd.get() < 0 ||
        write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      throw DriverError("container setup failed: writing " + path + " (" + line.substr(0, line.size() - 1) +
                        "): " + ErrnoText(errno));
    }
  }
}

// The job's work dir as its paused child mounted it, through the child's
// root (nothing of the job has run yet, so nothing in the path is the job's).
int OpenMountedWorkDir(pid_t pid, const ChildPlan& plan) {
  const std::string path = "/proc/" + std::to_string(pid) + "/root" + plan.workdir;
  int fd = open(path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    throw DriverError("container setup failed: opening the job's disk at " + path + ": " +
                      ErrnoText(errno));
  }
  return fd;
}

// One report from the child (false at EOF or on a short one); *sender: the
// pid of the process that sent it, as this process sees it (0 if unknown).
bool ReceiveReport(int fd, container::ChildReport* report, size_t* got, pid_t* sender) {
  *got = 0;
  *sender = 0;
  while (*got < sizeof *report) {
    iovec iov{reinterpret_cast<char*>(report) + *got, sizeof *report - *got};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        ucred cred;
        std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
        *sender = cred.pid;
      }
    }
    *got += static_cast<size_t>(n);
  }
  return true;
}

pid_t ContainerDriver::AwaitExec(int parent_end, pid_t pid, const ChildPlan& plan,
                                 const RunRequest& req, container::JobDisk* disk,
                                 std::optional<network::Attachment>* net) const {
  // Release the child, then learn how its exec went: EOF (the socket closed
  // on exec) means it is running the job; a report means setup failed, or
  // that its user namespace waits for its id maps, or that the job forked.
  char go = 'g';
  send(parent_end, &go, 1, MSG_NOSIGNAL);
  container::ChildReport report{};
  size_t got = 0;
  pid_t job = pid;
  for (pid_t sender = 0; ReceiveReport(parent_end, &report, &got, &sender);) {
    if (report.step == container::kForked) {
      if (sender > 0) job = sender;
      continue;
    }
    if (report.step != container::kPaused) break;
    if (plan.userns) WriteIdMaps(pid, plan.id_range);
    if (disk) {
      // The job's files go onto its own disk, as mounted (nothing of the job ran yet).
      const int work_fd = OpenMountedWorkDir(pid, plan);
      try {
        WriteJobFiles(work_fd, req.spec.files, plan.HostUid(), plan.HostGid());
      } catch (...) {
        close(work_fd);
        throw;
      }
      disk->Mounted(work_fd);
    }
    if (plan.await_network && !*net) {
      if (!req.network) {
        throw DriverError(
            "network \"bridge\" is not available on this host (hostd has no "
            "working CNI configuration)");
      }
      try {
        *net = network::Attach(*req.network, req.attempt_dir,
                               network::ContainerId(network_scope_, req.job_id, req.attempt), pid,
                               req.spec.ports);
      } catch (const std::exception& e) {
        throw DriverError(std::string("network \"bridge\" could not be set up: ") + e.what());
      }
    }
    char mapped = 'm';
    send(parent_end, &mapped, 1, MSG_NOSIGNAL);
  }
  if (got == 0) return job;
  if (got != sizeof report) throw DriverError("container setup failed: short report from child");
  if (report.step == container::kExec) {
    throw DriverError("exec \"" + req.spec.command[0] + "\": " + ErrnoText(report.err));
  }
  throw DriverError(container::DescribeFailure(report, plan));
}

std::unique_ptr<Execution> ContainerDriver::Start(const RunRequest& req) {
  const std::string ids = "job=" + std::to_string(req.job_id) +
                          " attempt=" + std::to_string(req.attempt) +
                          " host=" + (req.host_id.empty() ? opts_.host_id : req.host_id);
  ChildPlan plan = container::BuildPlan(req, context_);
  std::unique_ptr<container::JobDisk> disk;
  if (req.spec.disk > 0) {
    disk = container::JobDisk::Make(req.attempt_dir, req.spec.disk, plan.HostUid(), plan.HostGid());
    plan.disk_device = disk->device();
  } else if (!req.spec.files.empty()) {
    // Into the work dir BuildPlan gave the job's user (its host ids).
    Fd work(open(plan.work_source.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (work.get() < 0) {
      throw DriverError("cannot open the job dir " + plan.work_source + ": " + ErrnoText(errno));
    }
    WriteJobFiles(work.get(), req.spec.files, plan.HostUid(), plan.HostGid());
  }
  ChildFds fds;
  OpenChildFds(req, &plan, &fds);

  int flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | SIGCHLD;
  if (container::WantsNewNetwork(req.spec)) flags |= CLONE_NEWNET;
  // The child runs on its own copy of this buffer (no CLONE_VM), so it can be
  // freed as soon as clone() returns here.
  std::unique_ptr<char[]> stack(new char[kChildStackSize]);
  pid_t pid = clone(container::ChildMain, stack.get() + kChildStackSize, flags, &plan);
  if (pid < 0) throw DriverError("clone: " + ErrnoText(errno));
  stack.reset();
  fds.child_end.reset();
  fds.status_write.reset();
  fds.log.reset();
  fds.null.reset();

  auto reap = [pid] {
    kill(pid, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  };
  std::unique_ptr<JobCgroup> cgroup;
  std::optional<network::Attachment> net;
  pid_t job = pid;
  try {
    cgroup = MakeCgroup(req, pid);
    job = AwaitExec(fds.parent_end.get(), pid, plan, req, disk.get(), &net);
  } catch (const std::exception& e) {
    reap();
    cgroup.reset();
    std::string error;
    if (net && !network::Detach(*net, req.attempt_dir, &error)) {
      spdlog::warn("{} network not taken down after the failed start: {}", ids, error);
    }
    throw DriverError(e.what());
  }
  if (net) spdlog::debug("{} network {} address={}", ids, net->container_id, net->address());
  spdlog::debug("{} container started init={} job={} cgroup={}", ids, pid, job, cgroup->path());
  return container::MakeExecution(pid, job, fds.status_read.release(), std::move(cgroup),
                                  req.spec.memory, ids, std::move(disk), std::move(net),
                                  req.attempt_dir);
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
  if (!opts.data_dir.empty()) SetCgroupScope(opts.data_dir);
  {
    // Unprivileged jobs run in user namespaces, never as host users.
    Fd fd(open("/proc/sys/user/max_user_namespaces", O_RDONLY | O_CLOEXEC));
    char buf[24] = {};
    if (fd.get() >= 0 && read(fd.get(), buf, sizeof buf - 1) > 0 && std::atol(buf) == 0) {
      throw DriverError(
          "container driver unavailable: user namespaces are disabled "
          "(/proc/sys/user/max_user_namespaces is 0), and unprivileged jobs run in their own");
    }
  }

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
