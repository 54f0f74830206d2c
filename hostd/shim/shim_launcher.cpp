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
#include "hostd/shim/launcher_protocol.h"

extern char** environ;

namespace pgfleet::hostd {

using launcher::kLauncherFd;
using launcher::ReceiveWithFds;
using launcher::SendWithFds;

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

}  // namespace pgfleet::hostd
