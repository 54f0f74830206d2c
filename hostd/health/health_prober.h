#pragma once
// hostd's health checks, one check of one attempt at a time: a prober runs
// it and says whether it passed and what it printed. HealthMonitor
// (health_monitor.h) decides when; the prober only how.
//
//   - JobProber (this file): the real checks. A command runs inside the job
//     as `pgfleet exec` would run it (hostd/exec/: its namespaces, cgroup,
//     root, user, environment; a process-driver job's user, environment and
//     working directory), stdin /dev/null, killed at its timeout. HTTP GET
//     and TCP connect go to 127.0.0.1:<port> from the job's network
//     namespace when it has its own (setns on the probing thread, which
//     exists for that one check), else from hostd's.
//   - SimProber (hostd/hollow/sim.h): hollow hosts' checks, no process.
//
// A job is an adversary: output is bounded (kMaxHealthOutputBytes, valid
// UTF-8), every check has its timeout, nothing follows a path the job can
// write (only /proc/<pid>/ns and the exec helper's descriptors).

#include <string>

#include "hostd/supervisor/supervisor.h"

namespace pgfleet::hostd::health {

struct ProbeResult {
  bool passed = false;
  std::string output;  // at most model::kMaxHealthOutputBytes, valid UTF-8
};

class HealthProber {
 public:
  virtual ~HealthProber() = default;
  // Runs one check of `target` to its end or its timeout. Thread-safe: called
  // on a thread of its own per check (Inline: on the monitor's thread).
  virtual ProbeResult Probe(const HealthTarget& target) = 0;
  // True when Probe is instant and needs no thread of its own (sim).
  virtual bool Inline() const { return false; }
};

// The checks of a real host. host_id names the container driver's cgroups;
// own_root: jobs run with their own root and namespaces (the driver's
// capabilities, model/driver_kind.h).
class JobProber : public HealthProber {
 public:
  JobProber(std::string host_id, bool own_root)
      : host_id_(std::move(host_id)), own_root_(own_root) {}
  ProbeResult Probe(const HealthTarget& target) override;

 private:
  ProbeResult Command(const HealthTarget& target);
  const std::string host_id_;
  const bool own_root_;
};

// HTTP GET or TCP connect to 127.0.0.1:<port> in the network namespace of
// process `pid` (0, or the same as hostd's: hostd's own). Passes on a
// connect (tcp) or a 2xx or 3xx status (http). health_net.cpp.
ProbeResult ProbeNetwork(const model::HealthCheck& check, pid_t pid);

// Bytes as a check's output: valid UTF-8, at most kMaxHealthOutputBytes,
// never cut inside a character; surrounding whitespace trimmed.
std::string BoundOutput(const std::string& raw);

}  // namespace pgfleet::hostd::health
