#include "hostd/shim/shim_launcher.h"

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
#include "hostd/attempt/attempt_dir.h"
#include "hostd/drivers/driver.h"
#include "hostd/shim/shim.h"

extern char** environ;

namespace pgfleet::hostd {
namespace {

constexpr int kLauncherFd = 3;
constexpr size_t kMaxMessage = 8192;

// Sends `text` with up to two descriptors attached.
bool SendWithFds(int sock, const std::string& text, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  }
  ssize_t n;
  do {
    n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(text.size());
}

// Receives one message; fills *fds with the descriptors that came with it
// (close-on-exec). Returns the byte count, 0 on EOF, -1 on error.
ssize_t ReceiveWithFds(int sock, std::string* text, std::vector<int>* fds) {
  char buf[kMaxMessage];
  iovec iov{buf, sizeof buf};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return n;
  text->assign(buf, static_cast<size_t>(n));
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds->push_back(fd);
    }
  }
  return n;
}

void ReapAll() {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

}  // namespace

ShimLauncher::ShimLauncher(std::string binary, std::string driver, std::string data_dir,
                           std::string host_id, uint64_t nofile, JobIdRange job_ids)
    : binary_(std::move(binary)),
      driver_(std::move(driver)),
      data_dir_(std::move(data_dir)),
      host_id_(std::move(host_id)),
      nofile_(nofile),
      job_ids_(job_ids) {}

ShimLauncher::~ShimLauncher() {
  util::MutexLock lock(mu_);
  Close();
}

void ShimLauncher::Close() {
  if (sock_ >= 0) close(sock_);
  sock_ = -1;
  if (pid_ > 0) {
    // EOF makes it exit; it may be busy forking for an instant.
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

bool ShimLauncher::Spawn(std::string* error) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    *error = std::string("socketpair: ") + std::strerror(errno);
    return false;
  }
  // Keep the launcher's end off 0..3 so the dup2 below cannot clobber it.
  int theirs = sv[1];
  if (theirs <= kLauncherFd) {
    theirs = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    close(sv[1]);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, theirs, kLauncherFd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own session: signals to hostd's process group never reach the launcher or its shims.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD}) {
    sigaddset(&defaults, s);
  }
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  // argv[0]: the real path for ps, also when exec'ing /proc/self/exe.
  std::string a0 = binary_;
  char real[4096];
  ssize_t n = readlink(binary_.c_str(), real, sizeof real - 1);
  if (n > 0) a0.assign(real, static_cast<size_t>(n));
  std::string a1 = "shim-launcher", a2 = driver_, a3 = data_dir_, a4 = host_id_,
              a5 = std::to_string(nofile_), a6 = FormatJobIdRange(job_ids_);
  char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(),
                  a4.data(), a5.data(), a6.data(), nullptr};
  // Resolve every symbol once, in the launcher: with lazy binding each forked
  // shim would redo the lookups its code path needs (measurably, per job).
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "LD_BIND_NOW=", 12) != 0) env_store.emplace_back(*e);
  }
  env_store.emplace_back("LD_BIND_NOW=1");
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, binary_.c_str(), &actions, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(theirs);
  if (rc != 0) {
    close(sv[0]);
    *error = "cannot start the shim launcher " + binary_ + ": " + std::strerror(rc);
    return false;
  }
  sock_ = sv[0];
  pid_ = pid;
  return true;
}

ShimLauncher::Result ShimLauncher::Launch(const std::string& dir, const std::string& request,
                                          int start_pipe, int lock_fd, std::string* error) {
  // The request travels as a memfd: no file to create, no size limit.
  int request_fd = memfd_create("pgfleet-shim-request", MFD_CLOEXEC);
  if (request_fd < 0) {
    *error = std::string("memfd_create: ") + std::strerror(errno);
    return {};
  }
  for (size_t done = 0; done < request.size();) {
    ssize_t n = write(request_fd, request.data() + done, request.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = std::string("writing the shim request: ") + std::strerror(errno);
      close(request_fd);
      return {};
    }
    done += static_cast<size_t>(n);
  }
  Result r = LaunchLocked(dir, {start_pipe, lock_fd, request_fd}, error);
  close(request_fd);
  return r;
}

ShimLauncher::Result ShimLauncher::LaunchLocked(const std::string& dir, const std::vector<int>& fds,
                                                std::string* error) {
  util::MutexLock lock(mu_);
  for (int round = 0; round < 2; ++round) {
    if (sock_ < 0 && !Spawn(error)) return {};
    if (!SendWithFds(sock_, dir, fds)) {
      // The launcher was gone before it got the request (killed, crashed):
      // nothing was forked, so start a new one and try once more.
      *error = std::string("shim launcher gone: ") + std::strerror(errno);
      Close();
      continue;
    }
    std::string reply;
    std::vector<int> got;
    if (ReceiveWithFds(sock_, &reply, &got) <= 0) {
      // It died after taking the request: a shim may have been forked.
      // Never fork another (it would share the lock's open file description
      // and start the job twice); the start pipe tells whether one runs.
      *error = std::string("shim launcher died while starting the shim: ") + std::strerror(errno);
      Close();
      Result r;
      r.maybe_started = true;
      return r;
    }
    for (int fd : got) close(fd);
    if (reply.rfind("error ", 0) == 0) {
      *error = reply.substr(6);
      return {};
    }
    long long pid = 0, start = -1;
    if (std::sscanf(reply.c_str(), "%lld %lld", &pid, &start) == 2 && pid > 0) {
      Result r;
      r.shim = {static_cast<pid_t>(pid), start};
      r.maybe_started = true;
      return r;
    }
    *error = "shim launcher sent \"" + reply + "\"";
    return {};
  }
  return {};
}

namespace {

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
