#include "hostd/network/cni_plugin.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/model/json_limits.h"

namespace pgfleet::hostd::network {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMaxOutput = 1 << 20;

std::string Name(const std::string& program) { return program.substr(program.rfind('/') + 1); }

// write(2) to a pipe whose reader may be gone (a plugin that never reads
// its stdin), without SIGPIPE ending this process, whatever its handlers:
// the signal is blocked around the write and a pending one consumed.
ssize_t WriteNoSigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  ssize_t n = write(fd, data, size);
  const int err = errno;
  if (n < 0 && err == EPIPE) {
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &zero) == SIGPIPE) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return n;
}

// Writes `in` to fd_in and reads fd_out and fd_err until both close or the
// deadline passes; false on timeout.
bool Exchange(int fd_in, int fd_out, int fd_err, const std::string& in, std::string* out,
              std::string* err, Clock::time_point deadline) {
  size_t written = 0;
  if (in.empty()) {
    close(fd_in);
    fd_in = -1;
  }
  while (fd_out >= 0 || fd_err >= 0) {
    pollfd fds[3];
    int n = 0;
    int idx_in = -1, idx_out = -1, idx_err = -1;
    if (fd_in >= 0) fds[idx_in = n++] = {fd_in, POLLOUT, 0};
    if (fd_out >= 0) fds[idx_out = n++] = {fd_out, POLLIN, 0};
    if (fd_err >= 0) fds[idx_err = n++] = {fd_err, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    int r = poll(fds, static_cast<nfds_t>(n), static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (idx_in >= 0 && fds[idx_in].revents) {
      ssize_t w = WriteNoSigpipe(fd_in, in.data() + written, in.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if (w < 0 && errno != EINTR && errno != EAGAIN) written = in.size();
      if (written == in.size()) {
        close(fd_in);
        fd_in = -1;
      }
    }
    for (auto [idx, fd, text] :
         {std::tuple{idx_out, &fd_out, out}, std::tuple{idx_err, &fd_err, err}}) {
      if (idx < 0 || !fds[idx].revents) continue;
      char buf[16384];
      ssize_t got = read(*fd, buf, sizeof buf);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        close(*fd);
        *fd = -1;
      } else if (text->size() < kMaxOutput) {
        text->append(buf, static_cast<size_t>(got));
      }
    }
  }
  for (int fd : {fd_in, fd_out, fd_err}) {
    if (fd >= 0) close(fd);
  }
  return fd_out < 0 && fd_err < 0;
}

}  // namespace

json RunPlugin(const std::string& program, const PluginCall& call, const json& config,
               std::chrono::milliseconds timeout) {
  const std::string what = "CNI plugin " + Name(program) + " " + call.command;
  std::vector<std::string> env = {
      "CNI_COMMAND=" + call.command,
      "CNI_CONTAINERID=" + call.container_id,
      "CNI_NETNS=" + call.netns,
      "CNI_IFNAME=" + call.ifname,
      "CNI_PATH=" + call.path,
      "CNI_ARGS=" + call.args,
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string argv0 = program;
  char* argv[] = {argv0.data(), nullptr};

  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) throw PluginError(0, what + ": pipe: " + std::strerror(errno));
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]);
    throw PluginError(0, what + ": pipe: " + std::strerror(errno));
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    throw PluginError(0, what + ": pipe: " + std::strerror(errno));
  }
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so a timeout kills what it started too.
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, program.c_str(), &actions, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(in[0]), close(out[1]), close(err[1]);
  if (rc != 0) {
    close(in[1]), close(out[0]), close(err[0]);
    throw PluginError(0, what + ": cannot run " + program + ": " + std::strerror(rc));
  }
  std::string stdout_text, stderr_text;
  const bool done = Exchange(in[1], out[0], err[0], config.dump(), &stdout_text, &stderr_text,
                             Clock::now() + timeout);
  if (!done) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!done) {
    throw PluginError(0, what + " did not finish within " + std::to_string(timeout.count() / 1000) +
                             " s and was killed");
  }
  json result = nullptr;
  if (stdout_text.find_first_not_of(" \t\r\n") != std::string::npos) {
    try {
      result = model::ParseBoundedJson(stdout_text, what);
    } catch (const std::exception&) {
      result = nullptr;
    }
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    if (!stdout_text.empty() && result.is_null() &&
        stdout_text.find_first_not_of(" \t\r\n") != std::string::npos) {
      throw PluginError(0, what + " printed a result that is not JSON");
    }
    return result;
  }
  // The spec's error: {"cniVersion", "code", "msg", "details"}.
  if (result.is_object() && result.contains("msg")) {
    const json& c = result.contains("code") ? result["code"] : json(nullptr);
    const int code = c.is_number_integer() && c.get<int64_t>() >= 0 && c.get<int64_t>() < 1000000
                         ? static_cast<int>(c.get<int64_t>())
                         : 0;
    std::string msg = result["msg"].is_string() ? result["msg"].get<std::string>() : "";
    std::string details = result.contains("details") && result["details"].is_string()
                              ? result["details"].get<std::string>()
                              : "";
    throw PluginError(code, what + " failed (code " + std::to_string(code) + "): " + msg +
                                (details.empty() ? "" : " (" + details + ")"));
  }
  while (!stderr_text.empty() && (stderr_text.back() == '\n' || stderr_text.back() == ' ')) {
    stderr_text.pop_back();
  }
  std::string how = WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                      : "signal " + std::to_string(WTERMSIG(status));
  throw PluginError(0, what + " failed (" + how + ")" +
                           (stderr_text.empty() ? "" : ": " + stderr_text.substr(0, 1000)));
}

}  // namespace pgfleet::hostd::network
