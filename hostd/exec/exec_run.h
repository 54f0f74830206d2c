#pragma once
// Running a command inside a job to its end, without a client: hostd's own
// commands in jobs (health checks, hostd/health/), through the same helper
// as pgfleet exec (exec_helper.h). Bounded in time and output: a job is an
// adversary, and its command may print forever or never end.

#include <cstddef>
#include <string>

#include "hostd/exec/exec_helper.h"

namespace pgfleet::hostd::exec {

// A command run by a plan to its end, bounded (health checks): stdin
// /dev/null, stdout and stderr one stream of which the first max_output
// bytes are kept (the rest is read and dropped); killed (its helper, and
// so the command) once `timeout` passes.
struct BoundedRun {
  int exit_code = -1;  // the command's, or 128 + signal; -1 when it timed out or never ran
  bool timed_out = false;
  std::string output;   // stdout and stderr, at most max_output bytes
  std::string failure;  // why it could not be run ("" when it ran)
};
BoundedRun RunBounded(const ExecPlan& p, int timeout_ms, size_t max_output);

}  // namespace pgfleet::hostd::exec
