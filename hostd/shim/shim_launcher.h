#pragma once
// Starts shims cheaply (docs/decisions/0008): hostd execs `pgfleet-hostd
// shim-launcher` once, a small single-threaded process that forks one shim per
// request, ahead of time: one shim, the spare, waits forked for the next
// request. Each shim makes itself a session leader and runs RunShim's code;
// it never depends on the launcher or on hostd again.
//
// Protocol (SOCK_SEQPACKET, the launcher's end is its fd 3):
//   hostd -> launcher: the attempt dir (absolute path), with three descriptors
//                      (SCM_RIGHTS): the start pipe's write end, the locked
//                      attempt directory, a memfd holding the request JSON
//   launcher -> hostd: "<shim pid> <its start time>" or "error <message>"
//   launcher -> spare: the same request, forwarded (the spare is a child
//                      blocked on a socketpair of its own; it exits on EOF)
// The launcher exits when hostd's end closes (hostd exited or was killed);
// shims it forked keep running, an unused spare exits. It reaps its shims
// while it lives.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/util/mutex.h"
#include "hostd/attempt/attempt_dir.h"
#include "hostd/drivers/driver.h"

namespace pgfleet::hostd {

class ShimLauncher {
 public:
  // binary: the pgfleet-hostd executable (hostd: /proc/self/exe). nofile:
  // RLIMIT_NOFILE soft limit the launcher (so shims and jobs) runs with; 0 = as is.
  // job_ids: the container driver's --job-ids (drivers/driver.h JobIdRange).
  ShimLauncher(std::string binary, std::string driver, std::string data_dir, std::string host_id,
               uint64_t nofile = 0, JobIdRange job_ids = {});
  // Closes the socket (the launcher then exits) and reaps the launcher.
  ~ShimLauncher();
  ShimLauncher(const ShimLauncher&) = delete;
  ShimLauncher& operator=(const ShimLauncher&) = delete;

  struct Result {
    // The shim (read by its parent, the launcher, before it could be
    // reaped); pid 0 when unknown.
    attempt::ProcessId shim;
    // False: certainly no shim was forked (*error says why). True with pid 0:
    // the launcher died after taking the request, so a shim may run; only
    // the start pipe can tell.
    bool maybe_started = false;
  };
  // Forks a shim for `dir` running `request` (ShimRequest JSON) that holds
  // start_pipe as fd 3 and lock_fd (the locked attempt dir) as fd 4. Starts
  // (or restarts, once, if it had died before the request) the launcher when
  // needed. Thread-safe. The caller keeps its descriptors.
  Result Launch(const std::string& dir, const std::string& request, int start_pipe, int lock_fd,
                std::string* error);

 private:
  Result LaunchLocked(const std::string& dir, const std::vector<int>& fds, std::string* error);
  bool Spawn(std::string* error) REQUIRES(mu_);
  void Close() REQUIRES(mu_);

  const std::string binary_, driver_, data_dir_, host_id_;
  const uint64_t nofile_;
  const JobIdRange job_ids_;
  util::Mutex mu_;   // serialises requests on the socket
  int sock_ GUARDED_BY(mu_) = -1;
  pid_t pid_ GUARDED_BY(mu_) = -1;
};

// The launcher process: `pgfleet-hostd shim-launcher DRIVER DATA_DIR HOST_ID NOFILE`.
[[noreturn]] void RunShimLauncher(int argc, char** argv);

}  // namespace pgfleet::hostd
