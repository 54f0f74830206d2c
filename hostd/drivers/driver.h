#pragma once
// The one interface every way of running a job implements (process.h,
// container.h). Everything else in hostd (API, reporting, logs, stop policy)
// only talks to this, so a driver decides *how* a job runs, never *whether*.
// Drivers run inside the job's shim (shim.h), never in hostd itself.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model/driver_kind.h"
#include "core/model/job_spec.h"
#include "hostd/network/attachment.h"

namespace pgfleet::hostd {

// Thrown by Driver::Start when the job cannot be started (bad rootfs, unknown
// user, exec failure before the job ran...). The message is user-facing and
// lands in pgfleet.jobs.error.
class DriverError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RunRequest {
  int64_t job_id = 0;
  int attempt = 0;
  model::JobSpec spec;
  // The job's working directory (<attempt dir>/work), writable by the job;
  // the container driver gives it to the job's user. Nothing of hostd's is in it.
  std::string job_dir;
  // The attempt's own directory (root's, mode 0700, the job never sees it):
  // where a driver keeps what it makes for the job (the container's /etc files).
  std::string attempt_dir;
  std::string log_path;  // file receiving the job's stdout and stderr (combined, appended)
  // When >= 0, the job's stdout and stderr go here instead of log_path: the
  // write end of the shim's output pipe (output_log.h). The caller keeps it.
  int output_fd = -1;
  std::string host_id;  // for naming (cgroup path, hostname prefix...)
  // The host part of hostd's advertised API URL: the host of the job's
  // PGFLEET_ADDR_<NAME> (spec.ports holds the host ports it was given).
  std::string host_address;
  // Network "bridge": the CNI network hostd checked, to attach the job to
  // before its command runs (hostd/network/attachment.h); unset otherwise.
  std::optional<network::NetworkOptions> network;
};

// A descriptor (close-on-exec, above the stdio slots) for the job's stdout and
// stderr: a duplicate of req.output_fd, or req.log_path opened for appending
// with `mode`. -1 with errno set when it cannot be had.
int OpenJobOutput(const RunRequest& req, mode_t mode);

// The PATH a job gets when its spec sets none.
inline constexpr const char* kDefaultJobPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The environment a job runs with, as "KEY=value" strings in this order:
// spec.env (sorted by key), PATH=kDefaultJobPath when spec.env has no PATH,
// then PGFLEET_JOB_ID=<job> and PGFLEET_ATTEMPT=<attempt>, then the ports'
// PGFLEET_ADDR_<NAME> and PGFLEET_PORT_<NAME> (model::JobPortEnv, sorted, with
// req.host_address) for every network. Every driver uses it,
// so a job sees the same environment however it runs.
std::vector<std::string> JobEnvironment(const RunRequest& req);

// What a finished job reports. exit_code is set when it exited, signal when it
// was killed; error explains a failure in words (e.g. "out of memory (limit 64 MiB)").
struct ExitStatus {
  int exit_code = -1;
  int signal = 0;
  bool oom_killed = false;
  int64_t peak_memory_bytes = 0;
  double cpu_seconds = 0;
  std::string error;
};

// One started job. Wait() may be called from another thread than Start().
class Execution {
 public:
  virtual ~Execution() = default;
  // pid of the job's main process as seen from the host.
  virtual pid_t pid() const = 0;
  // Blocks until the job has exited, collects its usage, and releases
  // everything the driver made for it (cgroups, mounts). Called exactly once.
  virtual ExitStatus Wait() = 0;
  // Delivers sig to every process of the job (process group or cgroup).
  // Safe to call at any time, also after exit (then does nothing).
  virtual void Signal(int sig) = 0;
  // The job's own address on its network (network "bridge"); "" when it
  // has none of its own.
  virtual std::string address() const { return ""; }
};

class Driver {
 public:
  virtual ~Driver() = default;
  virtual std::string name() const = 0;
  // Starts the job; returns once its main process exists. Throws DriverError.
  virtual std::unique_ptr<Execution> Start(const RunRequest& req) = 0;
};

// The host ids the container driver maps every unprivileged job's user
// namespace onto (hostd --job-ids START:COUNT, like an /etc/subuid line):
// ids 0..count-1 inside a job are start..start+count-1 on the host, for uids
// and gids alike. One range per hostd, shared by its jobs (as Docker's
// userns-remap shares one); it must belong to pgfleet alone.
struct JobIdRange {
  uint32_t start = 1879048192;  // 0x70000000: above systemd's container ranges
  uint32_t count = 65536;
};
// "START:COUNT", checked: START >= 65536 (above the 16-bit ids host accounts
// use), COUNT >= model::kJobNamespaceIds, START + COUNT - 1 <= 2147483647.
// Throws std::invalid_argument naming --job-ids, the value and the rule.
JobIdRange ParseJobIdRange(const std::string& text);
std::string FormatJobIdRange(const JobIdRange& range);
// The first host account (user or group, from the host's databases) whose id
// falls in the range, as "user NAME (uid N)"; "" when none does. A job must
// never hold a host account's identity.
std::string JobIdRangeConflict(const JobIdRange& range);

struct DriverOptions {
  std::string data_dir;  // hostd's --data-dir (rootfs names resolve under <data_dir>/rootfs/)
  std::string host_id;
  JobIdRange job_ids;  // the container driver's user namespaces
};

// What the driver of that name (hostd --driver, after "auto" is resolved)
// can do; an unknown name can do nothing a process driver could not.
inline model::DriverCapabilities CapabilitiesOfDriver(const std::string& name) {
  return model::CapabilitiesOf(model::ParseDriverKind(name).value_or(model::DriverKind::kProcess));
}


}  // namespace pgfleet::hostd
