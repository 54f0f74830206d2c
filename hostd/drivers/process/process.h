#pragma once
// The process driver: runs the job's argv directly as a child of the caller
// (the job's shim) in its own process group, stdout and stderr appended to the
// job's log file. No isolation beyond that; used where the container driver
// cannot run (not root, no cgroups) and for fast tests.

#include <memory>

#include "hostd/drivers/driver.h"

namespace pgfleet::hostd {

std::unique_ptr<Driver> MakeProcessDriver(const DriverOptions& opts);

}  // namespace pgfleet::hostd
