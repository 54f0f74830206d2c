#include "hostd/drivers/container/container_init.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hostd/drivers/container/container_report.h"

extern char** environ;

namespace pgfleet::hostd::container {
namespace {

void NoHandler(int) {}


// sigprocmask, as a raw call on the kernel's sigset (64 signals).
void SetMask(int how, const sigset_t* set) { syscall(SYS_rt_sigprocmask, how, set, nullptr, 8); }

// The job's process: a session (and process group) of its own, every signal
// unblocked (exec resets the handlers), its pid told to the parent, then exec.
[[noreturn]] void ExecJob(ChildPlan& p) {
  // Default handlers before unblocking: a signal forwarded before the
  // job's exec acts on it as it would after.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) sigaction(s, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  SetMask(SIG_SETMASK, &none);
  syscall(SYS_setsid);
  ChildReport forked{kForked, 0};
  if (send(p.sync_fd, &forked, sizeof forked, MSG_NOSIGNAL) != sizeof forked) _exit(127);
  environ = p.envp.data();  // execvp searches the job's PATH, not hostd's
  execvp(p.argv[0], p.argv.data());
  ChildFail(p, kExec, errno);
}

}  // namespace

// The init's command line and environment, as the job sees them: its title,
// not the shim's command line (hostd's paths, the host id) nor hostd's
// environment. This child's copies of those strings are overwritten in
// place (its memory is its own: no CLONE_VM).
void NameInit(const ChildPlan& p) {
  if (p.arg_start) {
    const size_t room = static_cast<size_t>(p.arg_end - p.arg_start);
    const size_t n = p.init_title.size() < room ? p.init_title.size() : room - 1;
    memset(p.arg_start, 0, room);
    memcpy(p.arg_start, p.init_title.data(), n);
  }
  if (p.env_start) memset(p.env_start, 0, static_cast<size_t>(p.env_end - p.env_start));
  prctl(PR_SET_NAME, reinterpret_cast<unsigned long>(p.init_title.c_str()), 0, 0, 0);
}

// PID 1 of the container (container_child.h): forwards signals to the job's
// process group, reaps everything, ends with the job.
[[noreturn]] void RunInit(ChildPlan& p) {
  struct sigaction handled {};
  handled.sa_handler = NoHandler;
  sigfillset(&handled.sa_mask);
  for (int s = 1; s < NSIG; ++s) {
    if (s != SIGKILL && s != SIGSTOP) sigaction(s, &handled, nullptr);  // fails for glibc's own
  }
  sigset_t all;
  sigfillset(&all);
  SetMask(SIG_SETMASK, &all);  // taken below, one at a time, by sigtimedwait
  // A raw fork: glibc's would run atfork handlers of the threads this copy lost.
  const pid_t job = static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
  if (job < 0) ChildFail(p, kFork, errno);
  if (job == 0) ExecJob(p);
  // The job holds the sync socket until its exec closes it (or it reports a
  // failure): that is the parent's signal. The init keeps only the status
  // pipe: not the sync socket, not the job's output, nothing of the shim's.
  const int keep = p.status_fd;
  if (keep > 0) syscall(SYS_close_range, 0, keep - 1, 0);
  syscall(SYS_close_range, keep + 1, ~0U, 0);
  for (;;) {
    siginfo_t info;
    int sig = static_cast<int>(syscall(SYS_rt_sigtimedwait, &all, &info, nullptr, 8));
    if (sig < 0) continue;  // EINTR
    if (sig != SIGCHLD) {
      if (syscall(SYS_kill, -job, sig) != 0) syscall(SYS_kill, job, sig);
      continue;
    }
    int status = 0;
    for (pid_t r; (r = static_cast<pid_t>(syscall(SYS_wait4, -1, &status, WNOHANG, nullptr))) > 0;) {
      if (r != job) continue;  // an orphan that was reparented here
      ssize_t w = write(p.status_fd, &status, sizeof status);
      (void)w;
      _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
  }
}

}  // namespace pgfleet::hostd::container
