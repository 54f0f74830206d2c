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
// which must be single-threaded, with the start pipe on fd 3 and the locked
// shim.lock on fd 4 (both optional: without them the shim locks by itself
// and tells nobody). Uses `prepared` when it is the driver the attempt asks
// for, else makes its own. Logs through spdlog's default logger, which the
// caller sets up (the launcher does it once for all the shims it forks).
// Never returns: the process ends with _exit, so no destructor of a driver
// shared with other shims (the per-host cgroup) runs.
[[noreturn]] void RunShim(const std::string& dir, Driver* prepared);

// `pgfleet-hostd shim DIR`: the same, as a command (debugging, manual runs).
[[noreturn]] void RunShimCommand(int argc, char** argv);

}  // namespace pgfleet::hostd
