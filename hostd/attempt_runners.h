#pragma once
// The attempt runner (attempt/attempt_runner.h) for a host's driver: each
// attempt under a shim (shim/shim_runner.h) for process and container, a
// deadline on a timer (hollow/sim.h) for sim. Above the supervisor, which
// is given its runner, so neither layer links the other.

#include <memory>

#include "hostd/attempt/attempt_runner.h"
#include "hostd/supervisor/supervisor.h"

namespace pgfleet::hostd {

std::unique_ptr<AttemptRunner> MakeAttemptRunner(const SupervisorOptions& options);

}  // namespace pgfleet::hostd
