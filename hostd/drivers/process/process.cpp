#include "hostd/drivers/process/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/util/mutex.h"
#include "hostd/drivers/job_files_writer.h"

namespace pgfleet::hostd {
namespace {

class ProcessExecution : public Execution {
 public:
  explicit ProcessExecution(pid_t pid) : pid_(pid) {}
  pid_t pid() const override { return pid_; }

  ExitStatus Wait() override {
    int status = 0;
    struct rusage ru {};
    pid_t r;
    do {
      r = wait4(pid_, &status, 0, &ru);
    } while (r < 0 && errno == EINTR);
    ExitStatus out;
    {
      util::MutexLock lock(mu_);
      reaped_ = true;
    }
    // Whatever the job left in its process group goes with it.
    kill(-pid_, SIGKILL);
    if (r < 0) {
      out.error = std::string("waiting for the job failed: ") + std::strerror(errno);
      return out;
    }
    if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
    out.cpu_seconds = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                      static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    out.peak_memory_bytes = static_cast<int64_t>(ru.ru_maxrss) * 1024;  // ru_maxrss is in KiB
    return out;
  }

  void Signal(int sig) override {
    util::MutexLock lock(mu_);
    if (!reaped_) kill(-pid_, sig);  // the whole process group
  }

 private:
  pid_t pid_;
  util::Mutex mu_;
  bool reaped_ GUARDED_BY(mu_) = false;  // once true, pid_ may name another process
};

class ProcessDriver : public Driver {
 public:
  std::string name() const override { return "process"; }

  std::unique_ptr<Execution> Start(const RunRequest& req) override {
    if (req.spec.disk > 0) {
      throw DriverError("disk " + std::to_string(req.spec.disk) +
                        " MiB needs the container driver (this host runs jobs as plain processes, "
                        "which share hostd's disk)");
    }
    if (req.spec.network == "bridge") {
      throw DriverError(
          "network \"bridge\" needs the container driver (this host runs jobs as plain "
          "processes on the host's network)");
    }
    if (!req.spec.files.empty()) {
      // The job runs as this process's user: the files are its.
      int work = open(req.job_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (work < 0) {
        throw DriverError("cannot open the job dir " + req.job_dir + ": " + std::strerror(errno));
      }
      try {
        WriteJobFiles(work, req.spec.files, geteuid(), getegid());
      } catch (...) {
        close(work);
        throw;
      }
      close(work);
    }
    std::vector<std::string> env_store = JobEnvironment(req);
    std::vector<char*> envp, argv;
    for (auto& e : env_store) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = req.spec.command;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    int log_fd = OpenJobOutput(req, 0644);
    if (log_fd < 0)
      throw DriverError("cannot open log " + req.log_path + ": " + std::strerror(errno));

    // posix_spawn, not fork: the child shares our memory until exec (a vfork
    // in glibc), so a start costs no page-table copy however big the caller
    // is, and an exec or chdir failure comes back as the return value. The
    // job gets its own process group (Signal reaches all of it), a clean
    // signal mask and default dispositions, /dev/null on stdin, the log on
    // stdout and stderr, its attempt directory as working directory, and no
    // other descriptor of ours. Like execvpe, the PATH search uses our PATH.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, log_fd, 1);
    posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
    posix_spawn_file_actions_addchdir_np(&actions, req.job_dir.c_str());
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    close(log_fd);
    if (rc != 0) {
      throw DriverError("exec \"" + req.spec.command[0] + "\": " + std::strerror(rc));
    }
    return std::make_unique<ProcessExecution>(pid);
  }
};

}  // namespace

std::unique_ptr<Driver> MakeProcessDriver(const DriverOptions&) {
  return std::make_unique<ProcessDriver>();
}

}  // namespace pgfleet::hostd
