#pragma once
// hostd's side of the shim protocol (attempt_dir.h has the files and signals,
// shim_launcher.h how shims are forked): start one attempt's shim and learn
// how the start went, and signal a shim by its verified identity.
//
// Holds no attempt state: the supervisor (supervisor.h) decides when an
// attempt starts or is signalled; this file only knows how. Start() may run
// on several threads at once (the launcher serialises its own socket).
//
// What must hold: the attempt directory is locked on the shim's behalf
// before the shim exists (the shim inherits the lock), so from the moment
// Start() is called a restarted hostd never takes the attempt for "shim gone"
// while its shim lives.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "hostd/attempt/attempt_dir.h"
#include "hostd/shim/shim_launcher.h"

namespace pgfleet::hostd {

struct ShimClientOptions {
  std::string shim_binary;  // the pgfleet-hostd executable (see SupervisorOptions)
  std::string driver;
  std::string data_dir;
  std::string host_id;
  uint64_t job_nofile = 0;
  // How long Start() waits for the shim's "ok" or "fail".
  std::chrono::milliseconds start_timeout{20000};
  JobIdRange job_ids;  // hostd --job-ids
};

class ShimClient {
 public:
  explicit ShimClient(const ShimClientOptions& options);

  struct Started {
    attempt::ProcessId shim;  // who to signal
    pid_t job_pid = 0;        // the job's main process
    std::string address;      // the job's own address (network "bridge"); "" none
  };
  // Starts the shim of the attempt in `dir` (created by the caller, holding
  // nothing yet) running `req`, and waits for its answer. True with *out, or
  // false with *error. A shim that does not answer in time is told to kill
  // the job as soon as it has one (the error says so).
  bool Start(const std::string& dir, const attempt::ShimRequest& req, Started* out,
             std::string* error);

  // Sends shim_signal (attempt::kStopSignal or attempt::kKillSignal) to the
  // shim if it is still that very process; false when it is gone.
  static bool Signal(const attempt::ProcessId& shim, int shim_signal);

 private:
  // The start pipe's answer, read until EOF or the deadline.
  struct Reply {
    std::string text;       // "ok <pid>[ <address>]" or "fail <message>"
    bool complete = false;  // EOF seen: the shim has said all it will say
  };
  static Reply ReadReply(int fd, std::chrono::steady_clock::time_point deadline);
  // Turns a reply into Start()'s result.
  bool Judge(const std::string& dir, const Reply& reply, Started* out, std::string* error) const;

  const ShimClientOptions options_;
  ShimLauncher launcher_;
};

}  // namespace pgfleet::hostd
