#pragma once
// How a host runs its jobs (hostd --driver, pgfleet.hosts.driver), and what
// each way can do. Everything outside the drivers asks the capabilities,
// never the name: a new driver says what it can do here, once.
// SQL twin: pgfleet.driver_kinds() and pgfleet.driver_isolates(driver)
// (tests/integration/constants_test.cpp checks they agree).

#include <optional>
#include <string_view>

namespace pgfleet::model {

enum class DriverKind {
  kProcess,    // a plain process group as hostd's user (hostd/drivers/process/process.h)
  kContainer,  // namespaces, cgroups, a root (hostd/drivers/container/container.h)
  kSim,        // no process at all: hollow hosts (hostd/hollow/sim.h)
};

// "process", "container", "sim".
const char* DriverKindName(DriverKind kind);
// The kind of a name; nullopt for any other word.
std::optional<DriverKind> ParseDriverKind(std::string_view name);

struct DriverCapabilities {
  // Each attempt is a real process tree under a shim (not sim).
  bool runs_processes = false;
  // Jobs are isolated from the host and from each other, so unprivileged
  // jobs may run there (container; sim, whose jobs run nothing).
  bool isolates = false;
  // Each attempt has its own cgroup, pgfleet/<scope>/<host>/<job>-<attempt>:
  // usage is read from it, exec joins it, leftovers are removed by hostd.
  bool has_cgroup = false;
  // Each attempt has namespaces and a root of its own: exec joins them, fs
  // browses the job's root and acts as its user.
  bool has_own_root = false;
  // Unprivileged jobs run in user namespaces on hostd's --job-ids range.
  bool maps_job_ids = false;
  // A job's disk (spec.disk) is enforced.
  bool enforces_disk = false;
};

DriverCapabilities CapabilitiesOf(DriverKind kind);

}  // namespace pgfleet::model
