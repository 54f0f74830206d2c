#include "hostd/exec/exec_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace pgfleet::hostd::exec {

namespace {

void CloseAll(std::initializer_list<int> fds) {
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

}  // namespace

BoundedRun RunBounded(const ExecPlan& p, int timeout_ms, size_t max_output) {
  BoundedRun run;
  int out[2], fail[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    run.failure = std::string("pipe: ") + std::strerror(errno);
    return run;
  }
  if (pipe2(fail, O_CLOEXEC) != 0) {
    run.failure = std::string("pipe: ") + std::strerror(errno);
    CloseAll({out[0], out[1]});
    return run;
  }
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t helper = devnull < 0 ? -1 : fork();
  if (helper == 0) {
    close(out[0]);
    close(fail[0]);
    RunHelper(p, devnull, out[1], out[1], fail[1]);
  }
  const int fork_errno = errno;
  CloseAll({out[1], fail[1], devnull});
  if (helper < 0) {
    run.failure = std::string("fork: ") + std::strerror(fork_errno);
    CloseAll({out[0], fail[0]});
    return run;
  }
  fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      run.timed_out = true;
      break;
    }
    pollfd pfd{out[0], POLLIN, 0};
    int n = poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    ssize_t got = read(out[0], buf, sizeof buf);
    if (got == 0) break;  // every writer is gone: the command ended
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      break;
    }
    size_t keep =
        std::min(static_cast<size_t>(got), max_output - std::min(max_output, run.output.size()));
    run.output.append(buf, keep);  // past max_output: read and dropped
  }
  // The helper's death takes the command (PR_SET_PDEATHSIG) with it.
  if (run.timed_out) kill(helper, SIGKILL);
  int status = 0;
  while (waitpid(helper, &status, 0) < 0 && errno == EINTR) {
  }
  if (!run.timed_out) {
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    run.failure = HelperFailure(fail[0]);
  }
  CloseAll({out[0], fail[0]});
  return run;
}

}  // namespace pgfleet::hostd::exec
