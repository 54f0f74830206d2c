// The shim launcher process (`pgfleet-hostd shim-launcher ...`, started by
// ShimLauncher, shim_launcher.h): it forks one shim per request, keeping one
// forked ahead (the spare), and is the shims' parent while it lives.

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/util/log.h"
#include "core/util/mutex.h"
#include "hostd/drivers/driver_factory.h"
#include "hostd/attempt/attempt_dir.h"
#include "hostd/drivers/driver.h"
#include "hostd/shim/launcher_protocol.h"
#include "hostd/shim/shim.h"
#include "hostd/shim/shim_launcher.h"

namespace pgfleet::hostd {

using launcher::kLauncherFd;
using launcher::ReceiveWithFds;
using launcher::SendWithFds;

namespace {

void ReapAll() {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

// Made once, inherited by every shim (copy-on-write): the logger (lines go
// to each shim's stderr, the host's shim.log), the NSS modules, and the
// driver, never destroyed (see RunShim). nullptr when the driver cannot be
// made here (each shim then tries again and reports why).
Driver* PrepareForShims(const char* driver, const char* data_dir, const char* host_id,
                        const char* job_ids) {
  try {
    util::SetupLogging("shim", "info");
  } catch (const std::exception&) {
  }
  // Warm what shims would otherwise each load on first use: the NSS modules
  // behind user lookups (dlopen'ed lazily; the container driver resolves the
  // job's user in every shim).
  if (passwd* pw = getpwnam("nobody")) {
    int n = 8;
    gid_t groups[8];
    getgrouplist(pw->pw_name, pw->pw_gid, groups, &n);
  }
  try {
    return MakeDriver(driver, {data_dir, host_id, ParseJobIdRange(job_ids)}).release();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pgfleet-hostd shim-launcher: %s\n", e.what());
    return nullptr;
  }
}

// In a forked child: becomes the shim for one request (fds: start pipe,
// locked dir, request). Never returns.
[[noreturn]] void BecomeShim(const std::string& dir, const std::vector<int>& fds, Driver* driver) {
  // Descriptors to their agreed numbers (via high numbers, so neither dup2
  // clobbers the other), then nothing of the launcher's.
  int pipe_fd = fcntl(fds[0], F_DUPFD, 10);
  int lock_fd = fcntl(fds[1], F_DUPFD, 10);
  int request_fd = fcntl(fds[2], F_DUPFD, 10);
  if (pipe_fd < 0 || lock_fd < 0 || request_fd < 0) _exit(127);
  dup2(pipe_fd, attempt::kStartPipeFd);
  dup2(lock_fd, attempt::kLockFd);
  dup2(request_fd, attempt::kRequestFd);
  RunShim(dir, driver);  // closes every other descriptor, the launcher socket included
}

// Forks the shim for one request and answers hostd with the shim's identity
// or the error.
void ForkShim(int sock, const std::string& dir, const std::vector<int>& fds, Driver* driver) {
  pid_t pid = fork();
  if (pid == 0) BecomeShim(dir, fds, driver);
  int err = errno;
  for (int fd : fds) close(fd);
  // Not reaped before the next ReapAll(), so its /proc entry is surely its own.
  std::string reply = pid > 0 ? attempt::FormatProcessId({pid, attempt::ProcStartTime(pid)})
                              : "error fork: " + std::string(std::strerror(err));
  SendWithFds(sock, reply, {});
}

// A shim forked before its request, waiting for it on a socket of its own:
// the fork (a few hundred microseconds, copying the launcher's page tables)
// is then paid between jobs, not on a job's way to running.
struct Spare {
  attempt::ProcessId id;
  int sock = -1;  // the launcher's end; closing it makes an unused spare exit
};

bool ForkSpare(int launcher_sock, Driver* driver, Spare* spare) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return false;
  pid_t pid = fork();
  if (pid == 0) {
    // Holding hostd's socket would keep the launcher's end open after the
    // launcher is gone: hostd must see EOF then.
    close(launcher_sock);
    close(sv[0]);
    std::string dir;
    std::vector<int> fds;
    // EOF or garbage: the launcher is gone or gave this spare up.
    if (ReceiveWithFds(sv[1], &dir, &fds) <= 0 || fds.size() != 3) _exit(0);
    BecomeShim(dir, fds, driver);
  }
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    return false;
  }
  spare->id = {pid, attempt::ProcStartTime(pid)};
  spare->sock = sv[0];
  return true;
}

// Hands the request to the spare and answers hostd with its identity. False
// (the spare given up, the descriptors still ours) when it is gone.
bool UseSpare(int sock, Spare* spare, const std::string& dir, const std::vector<int>& fds) {
  bool sent = SendWithFds(spare->sock, dir, fds);
  close(spare->sock);
  spare->sock = -1;
  if (!sent) return false;
  for (int fd : fds) close(fd);
  SendWithFds(sock, attempt::FormatProcessId(spare->id), {});
  return true;
}

}  // namespace

void RunShimLauncher(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr,
                 "usage: pgfleet-hostd shim-launcher DRIVER DATA_DIR HOST_ID NOFILE JOB_IDS\n"
                 "(internal: hostd starts it, with its socket on fd 3)\n");
    _exit(2);
  }
  const int sock = kLauncherFd;
  if (fcntl(sock, F_SETFD, FD_CLOEXEC) != 0) _exit(2);
  close_range(kLauncherFd + 1, UINT_MAX, 0);
  signal(SIGPIPE, SIG_IGN);
  unsetenv("LD_BIND_NOW");  // done its work (see Spawn); not for shims' children
  // Jobs get the descriptor limit hostd was started with, not the one it raised for itself.
  if (uint64_t nofile = std::strtoull(argv[5], nullptr, 10); nofile > 0) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && nofile < rl.rlim_cur) {
      rl.rlim_cur = nofile;
      setrlimit(RLIMIT_NOFILE, &rl);
    }
  }
  if (chdir("/") != 0) std::perror("pgfleet-hostd shim-launcher: chdir /");
  Driver* driver = PrepareForShims(argv[2], argv[3], argv[4], argv[6]);
  Spare spare;
  bool spare_failed = false;
  while (true) {
    pollfd pfd{sock, POLLIN, 0};
    // Without a spare, make one once no request came for a millisecond
    // (not while a shim just forked is starting its job on the same cores).
    int r = poll(&pfd, 1, spare.sock < 0 && !spare_failed ? 1 : 1000);
    ReapAll();  // shims that ended (the launcher is their parent while it lives)
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && spare.sock < 0) spare_failed = !ForkSpare(sock, driver, &spare);
    if (r <= 0) continue;
    std::string dir;
    std::vector<int> fds;
    ssize_t n = ReceiveWithFds(sock, &dir, &fds);
    if (n == 0) _exit(0);  // hostd is gone
    if (n < 0) {
      if (errno == EINTR) continue;
      _exit(1);
    }
    if (fds.size() != 3 || dir.empty() || dir[0] != '/') {
      for (int fd : fds) close(fd);
      SendWithFds(sock, "error malformed shim launch request", {});
      continue;
    }
    if (spare.sock >= 0 && UseSpare(sock, &spare, dir, fds)) continue;
    spare_failed = false;
    ForkShim(sock, dir, fds, driver);
  }
}

}  // namespace pgfleet::hostd
