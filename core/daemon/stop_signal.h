#pragma once
// How a daemon learns it should stop: SIGINT or SIGTERM set one process-wide
// flag that its loops poll; SIGPIPE is ignored, so a peer hanging up on a
// socket never kills the daemon.
//
// Who calls what: main() calls InstallStopSignals once, before starting its
// loops, and passes the flag it returns to them. The flag only ever goes from
// false to true.

#include <atomic>

namespace pgfleet::daemon {

const std::atomic<bool>& InstallStopSignals();

}  // namespace pgfleet::daemon
