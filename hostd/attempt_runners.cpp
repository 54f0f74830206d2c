#include "hostd/attempt_runners.h"

#include "hostd/hollow/sim.h"
#include "hostd/shim/shim_runner.h"

namespace pgfleet::hostd {

std::unique_ptr<AttemptRunner> MakeAttemptRunner(const SupervisorOptions& o) {
  if (!CapabilitiesOfDriver(o.driver).runs_processes) return std::make_unique<SimRunner>();
  return std::make_unique<ShimRunner>(ShimClientOptions{
      o.shim_binary, o.driver, o.data_dir, o.host_id, o.job_nofile, o.start_timeout, o.job_ids});
}

}  // namespace pgfleet::hostd
