#include "hostd/drivers/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

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
      std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    if (!reaped_) kill(-pid_, sig);  // the whole process group
  }

 private:
  pid_t pid_;
  std::mutex mu_;
  bool reaped_ = false;
};

class ProcessDriver : public Driver {
 public:
  std::string name() const override { return "process"; }

  std::unique_ptr<Execution> Start(const RunRequest& req) override {
    // Everything the child needs is prepared before fork: after fork in a
    // threaded process only async-signal-safe calls are allowed.
    std::vector<std::string> env_store;
    bool has_path = false;
    for (const auto& [k, v] : req.spec.env) {
      env_store.push_back(k + "=" + v);
      if (k == "PATH") has_path = true;
    }
    if (!has_path)
      env_store.push_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    env_store.push_back("PGFLEET_JOB_ID=" + std::to_string(req.job_id));
    env_store.push_back("PGFLEET_ATTEMPT=" + std::to_string(req.attempt));
    std::vector<char*> envp, argv;
    for (auto& e : env_store) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = req.spec.command;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    int log_fd = open(req.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0)
      throw DriverError("cannot open log " + req.log_path + ": " + std::strerror(errno));
    int err_pipe[2];
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
      close(log_fd);
      throw DriverError(std::string("pipe: ") + std::strerror(errno));
    }
    pid_t pid = fork();
    if (pid < 0) {
      int e = errno;
      close(log_fd);
      close(err_pipe[0]);
      close(err_pipe[1]);
      throw DriverError(std::string("fork: ") + std::strerror(e));
    }
    if (pid == 0) {
      setpgid(0, 0);
      sigset_t all;
      sigemptyset(&all);
      sigprocmask(SIG_SETMASK, &all, nullptr);
      for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);
      int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, 0);
      dup2(log_fd, 1);
      dup2(log_fd, 2);
      if (chdir(req.job_dir.c_str()) != 0) {
        int e = errno;
        (void)!write(err_pipe[1], &e, sizeof(e));
        _exit(127);
      }
      // Close every inherited descriptor except stdio and the error pipe.
      for (int fd = 3; fd < 65536; ++fd) {
        if (fd != err_pipe[1]) {
          if (close(fd) != 0 && errno == EBADF && fd > 1024) break;
        }
      }
      execvpe(argv[0], argv.data(), envp.data());
      int e = errno;
      (void)!write(err_pipe[1], &e, sizeof(e));
      _exit(127);
    }
    setpgid(pid, pid);  // also from the parent, so Signal() works before the child runs
    close(log_fd);
    close(err_pipe[1]);
    int child_errno = 0;
    ssize_t n;
    do {
      n = read(err_pipe[0], &child_errno, sizeof(child_errno));
    } while (n < 0 && errno == EINTR);
    close(err_pipe[0]);
    if (n == static_cast<ssize_t>(sizeof(child_errno))) {
      int status;
      waitpid(pid, &status, 0);
      throw DriverError("exec \"" + req.spec.command[0] + "\": " + std::strerror(child_errno));
    }
    return std::make_unique<ProcessExecution>(pid);
  }
};

}  // namespace

std::unique_ptr<Driver> MakeProcessDriver(const DriverOptions&) {
  return std::make_unique<ProcessDriver>();
}

}  // namespace pgfleet::hostd
