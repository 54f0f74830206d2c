#pragma once
// Making a driver by its name: the one place that knows every driver
// (drivers/process/, drivers/container/); everything else asks a driver's
// capabilities (driver.h CapabilitiesOfDriver) or its interface.

#include <memory>
#include <string>

#include "hostd/drivers/driver.h"

namespace pgfleet::hostd {

// "process" or "container". Throws std::invalid_argument for an unknown name.
std::unique_ptr<Driver> MakeDriver(const std::string& name, const DriverOptions& opts);

// "container" when running as root with the cgroup controllers it needs,
// otherwise "process"; `why` receives the reason for the choice.
std::string DefaultDriverName(std::string* why);

}  // namespace pgfleet::hostd
