#pragma once
// The per-attempt shim, the role of containerd-shim or conmon: one process
// per job, in its own session, that starts the job through the driver (so the
// job is its child), waits for it, records the outcome in the attempt
// directory, and forwards stop signals. hostd can be killed, restarted or
// upgraded meanwhile: nothing ties the shim's life to hostd's. attempt_dir.h
// describes the files and the signal protocol; shim_launcher.h how shims are
// started (forked by a launcher process, normally).

#include <string>

namespace pgfleet::hostd {

class Driver;

// Runs the shim for the attempt directory `dir` (absolute) in this process,
// which must be single-threaded, with the start pipe on fd 3, the attempt
// directory, already flock'ed by hostd, on fd 4 and the request on fd 5
// (attempt_dir.h). Without fds 3 and 4 the shim locks the directory itself
// and tells nobody; if it cannot take the lock (another shim holds it) it
// changes nothing and exits. The shim keeps the lock until it has recorded
// the job's outcome, so the lock is held exactly while the attempt may
// still produce an outcome. Uses `prepared` when it is the driver the attempt asks
// for, else makes its own. Logs through spdlog's default logger, which the
// caller sets up (the launcher does it once for all the shims it forks).
// Never returns: the process ends with _exit, so no destructor of a driver
// shared with other shims (the per-host cgroup) runs.
[[noreturn]] void RunShim(const std::string& dir, Driver* prepared);

// `pgfleet-hostd shim DIR`: the same, as a command (debugging, manual runs).
[[noreturn]] void RunShimCommand(int argc, char** argv);

}  // namespace pgfleet::hostd
