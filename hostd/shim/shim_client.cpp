#include "hostd/shim/shim_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace pgfleet::hostd {

using Clock = std::chrono::steady_clock;

ShimClient::ShimClient(const ShimClientOptions& options)
    : options_(options),
      launcher_(options.shim_binary, options.driver, options.data_dir, options.host_id,
                options.job_nofile, options.job_ids) {}

bool ShimClient::Signal(const attempt::ProcessId& shim, int shim_signal) {
  return attempt::SignalProcess(shim, shim_signal);
}

bool ShimClient::Start(const std::string& dir, const attempt::ShimRequest& req, Started* out,
                       std::string* error) {
  // Lock on the shim's behalf before it exists: it inherits this open file
  // description, so from here on the attempt never looks "shim gone" while
  // its shim is alive, even if hostd dies this instant.
  int lock_fd = attempt::OpenLock(dir);
  if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    *error = "cannot lock " + dir + ": " + std::strerror(errno);
    if (lock_fd >= 0) close(lock_fd);
    return false;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    close(lock_fd);
    return false;
  }
  int reply_fd = fds[0];
  ShimLauncher::Result launched =
      launcher_.Launch(dir, attempt::ToJson(req).dump(), fds[1], lock_fd, error);
  close(fds[1]);
  close(lock_fd);  // the shim's copy keeps the lock
  if (!launched.maybe_started) {
    close(reply_fd);
    return false;
  }
  out->shim = launched.shim;  // unknown (0) only if the launcher died: see below
  Reply reply = ReadReply(reply_fd, Clock::now() + options_.start_timeout);
  close(reply_fd);
  if (out->shim.pid <= 0) {
    // The launcher died mid-request; if a shim got to run, it says who it is.
    if (auto started = attempt::ReadState(dir).started) out->shim = started->shim;
  }
  return Judge(dir, reply, out, error);
}

ShimClient::Reply ShimClient::ReadReply(int fd, Clock::time_point deadline) {
  Reply reply;
  while (!reply.complete) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{fd, POLLIN, 0};
    int r = poll(&pfd, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      reply.complete = true;
    } else {
      reply.text.append(buf, static_cast<size_t>(n));
    }
  }
  return reply;
}

bool ShimClient::Judge(const std::string& dir, const Reply& reply, Started* out,
                       std::string* error) const {
  if (reply.complete && reply.text.rfind("ok ", 0) == 0) {
    out->job_pid = static_cast<pid_t>(std::atoi(reply.text.c_str() + 3));
    const size_t space = reply.text.find(' ', 3);
    if (space != std::string::npos) {
      // An address, as the shim's driver read it from the CNI result; the
      // database checks it again (pgfleet.reported_address).
      std::string addr = reply.text.substr(space + 1, 45);
      if (addr.find_first_not_of("0123456789abcdefABCDEF.:") == std::string::npos) {
        out->address = addr;
      }
    }
    if (out->job_pid > 0) return true;
  }
  if (!reply.complete) {
    // A shim this slow may still start the job: have it kill the job as soon
    // as it has one (the signal waits in its mask).
    bool told = Signal(out->shim, attempt::kKillSignal);
    *error = "the job's shim did not report within " +
             std::to_string(options_.start_timeout.count() / 1000) + " s" +
             (told ? "; it was told to kill the job" : "");
    return false;
  }
  if (reply.text.rfind("fail ", 0) == 0) {
    *error = reply.text.substr(5);
  } else if (auto o = attempt::ReadState(dir).outcome;
             o && o->kind == model::ExitOutcome::kStartFailed) {
    *error = o->status.error;
  } else {
    *error = "the job's shim ended before starting the job; see " + options_.data_dir + "/" +
             attempt::kShimLogFile;
  }
  return false;
}

}  // namespace pgfleet::hostd
