#include "hostd/drivers/driver.h"

#include <fcntl.h>
#include <unistd.h>

#include "hostd/drivers/container.h"
#include "hostd/drivers/process.h"

namespace pgfleet::hostd {

std::vector<std::string> JobEnvironment(const RunRequest& req) {
  std::vector<std::string> env;
  for (const auto& [key, value] : req.spec.env) env.push_back(key + "=" + value);
  if (!req.spec.env.count("PATH")) env.push_back(std::string("PATH=") + kDefaultJobPath);
  env.push_back("PGFLEET_JOB_ID=" + std::to_string(req.job_id));
  env.push_back("PGFLEET_ATTEMPT=" + std::to_string(req.attempt));
  return env;
}

int OpenJobOutput(const RunRequest& req, mode_t mode) {
  if (req.output_fd >= 0) return fcntl(req.output_fd, F_DUPFD_CLOEXEC, 3);
  int fd = open(req.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, mode);
  if (fd < 0 || fd >= 3) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);  // clear of the stdio slots it is dup'ed onto
  close(fd);
  return moved;
}

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
