#include "hostd/drivers/driver_factory.h"

#include <stdexcept>

#include "hostd/drivers/container/container.h"
#include "hostd/drivers/process/process.h"

namespace pgfleet::hostd {

std::unique_ptr<Driver> MakeDriver(const std::string& name, const DriverOptions& opts) {
  if (name == "process") return MakeProcessDriver(opts);
  if (name == "container") {
    std::string why;
    if (!ContainerDriverAvailable(&why)) {
      throw std::invalid_argument("--driver container cannot run here: " + why);
    }
    return MakeContainerDriver(opts);
  }
  throw std::invalid_argument("--driver must be container or process (got \"" + name + "\")");
}

std::string DefaultDriverName(std::string* why) {
  std::string reason;
  if (ContainerDriverAvailable(&reason)) {
    *why = "root with cgroups: jobs run as containers";
    return "container";
  }
  *why = "container driver unavailable (" + reason + "): jobs run as plain processes";
  return "process";
}

}  // namespace pgfleet::hostd
