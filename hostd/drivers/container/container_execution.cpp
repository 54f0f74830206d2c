#include "hostd/drivers/container/container_execution.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "core/util/mutex.h"
#include "hostd/drivers/container/container_plan.h"

namespace pgfleet::hostd::container {
namespace {

class ContainerExecution : public Execution {
 public:
  // init: the container's PID 1 (our child); job: the job's process, as the
  // host sees it; status_fd: read end of the init's status pipe (owned).
  ContainerExecution(pid_t init, pid_t job, int status_fd, std::unique_ptr<JobCgroup> cgroup,
                     int memory_mib, std::string ids, std::unique_ptr<JobDisk> disk,
                     std::optional<network::Attachment> net, std::string attempt_dir)
      : pid_(init),
        job_pid_(job),
        status_(status_fd),
        cgroup_(std::move(cgroup)),
        memory_mib_(memory_mib),
        ids_(std::move(ids)),
        disk_(std::move(disk)),
        net_(std::move(net)),
        address_(net_ ? net_->address() : std::string()),
        attempt_dir_(std::move(attempt_dir)) {}

  ~ContainerExecution() override {
    if (!waited_) {
      Signal(SIGKILL);
      Wait();
    }
    close(status_);
  }

  pid_t pid() const override { return job_pid_; }
  std::string address() const override { return address_; }

  ExitStatus Wait() override {
    int status = 0;
    pid_t r;
    do {
      r = waitpid(pid_, &status, 0);
    } while (r < 0 && errno == EINTR);
    int wait_errno = errno;

    util::MutexLock lock(mu_);
    waited_ = true;
    ExitStatus s;
    if (r == pid_) {
      // The job's own status, as the init saw it; the init's when it wrote
      // none (it was killed: SIGKILL to the container, or its setup failed).
      int job_status = 0;
      if (read(status_, &job_status, sizeof job_status) == sizeof job_status) {
        status = job_status;
      }
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
    if (disk_) {
      // Said only of a job that failed: a full disk it coped with is its own.
      std::string full = disk_->End();
      bool failed = s.signal != 0 || s.exit_code != 0;
      if (!full.empty() && failed && s.error.empty()) s.error = full;
    }
    if (net_) {
      // The job is gone: its network goes too (hostd retries from the saved
      // record, attempt/outcome.h, if this fails or never runs).
      std::string error;
      if (!network::Detach(*net_, attempt_dir_, &error)) {
        spdlog::warn("{} network {} not taken down: {}", ids_, net_->container_id, error);
      }
    }
    spdlog::debug("{} container exited code={} signal={} oom={} peak={} cpu={:.3f}s", ids_,
                  s.exit_code, s.signal, s.oom_killed, s.peak_memory_bytes, s.cpu_seconds);
    return s;
  }

  void Signal(int sig) override {
    util::MutexLock lock(mu_);
    if (waited_) return;
    if (sig == SIGKILL) {
      if (!cgroup_->KillAll()) spdlog::warn("{} processes survive SIGKILL", ids_);
    } else {
      // To the init, which forwards it to the job's process group once:
      // our unreaped child, so the pid is still its.
      kill(pid_, sig);
    }
  }

 private:
  const pid_t pid_;      // the init
  const pid_t job_pid_;  // the job (the init's when it could not be learned)
  const int status_;  // owned
  std::unique_ptr<JobCgroup> cgroup_;
  const int memory_mib_;
  const std::string ids_;
  const std::unique_ptr<JobDisk> disk_;  // null: no disk limit
  const std::optional<network::Attachment> net_;  // network "bridge"
  const std::string address_;
  const std::string attempt_dir_;
  util::Mutex mu_;
  bool waited_ GUARDED_BY(mu_) = false;  // once true, the cgroup is gone
};

}  // namespace

std::unique_ptr<Execution> MakeExecution(pid_t init, pid_t job, int status_fd,
                                         std::unique_ptr<JobCgroup> cgroup, int memory_mib,
                                         std::string ids, std::unique_ptr<JobDisk> disk,
                                         std::optional<network::Attachment> net,
                                         std::string attempt_dir) {
  return std::make_unique<ContainerExecution>(init, job, status_fd, std::move(cgroup), memory_mib,
                                              std::move(ids), std::move(disk), std::move(net),
                                              std::move(attempt_dir));
}

}  // namespace pgfleet::hostd::container
