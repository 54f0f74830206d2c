#pragma once
// hostd's health checks of service and system replicas (jobs.health_check):
// HealthMonitor owns, per running attempt with a check, its
// model::HealthTracker (when the next check is due; thresholds, grace),
// starts each check through a HealthProber (health_prober.h), and acts on
// what the checks find:
//   - health changed (unknown -> healthy, healthy <-> unhealthy): one
//     health report (Supervisor::ReportHealth); nothing while it holds, so a
//     healthy fleet costs the database no writes;
//   - unhealthy (failure_threshold failures in a row): the attempt is
//     stopped (Supervisor::StopUnhealthy) with "health check failed N
//     times: <output>", and the restart policy makes a new attempt.
//
// What must hold: at most one check in flight per attempt, at most
// max_in_flight in all (a check not started for want of room is started on
// a later tick); a check's thread ends with it (it may join the job's
// network namespace). The monitor watches one or more supervisors (a
// hollow process has one per host) on one thread of its own; its methods
// are thread-safe.

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/model/health_check.h"
#include "core/util/mutex.h"
#include "hostd/health/health_prober.h"
#include "hostd/supervisor/supervisor.h"

namespace pgfleet::hostd::health {

struct HealthMonitorOptions {
  // How often the monitor looks for checks due (and results).
  std::chrono::milliseconds tick{200};
  // Checks in flight at once, over every supervisor watched.
  int max_in_flight = 64;
};

class HealthMonitor {
 public:
  HealthMonitor(std::vector<Supervisor*> supervisors, std::shared_ptr<HealthProber> prober,
                HealthMonitorOptions options = {});
  // Stops the monitor's thread; checks in flight end on their own (their
  // results are dropped).
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  void Start();
  // One pass: collect results, forget ended attempts, start checks due.
  // The thread calls it every tick; tests may call it instead of Start().
  void Tick();
  // Checks in flight now.
  int InFlight() const;

 private:
  struct Key {
    size_t supervisor;
    int64_t job;
    int attempt;
    std::string uid;
    bool operator<(const Key& o) const {
      return std::tie(supervisor, job, attempt, uid) <
             std::tie(o.supervisor, o.job, o.attempt, o.uid);
    }
  };
  struct Watched {
    model::HealthTracker tracker;
    bool stopped = false;  // StopUnhealthy was called
  };
  // What a check's thread hands back; outlives the monitor.
  struct Results {
    util::Mutex mu;
    std::vector<std::pair<Key, ProbeResult>> done GUARDED_BY(mu);
    int in_flight GUARDED_BY(mu) = 0;
  };
  void Apply(const Key& key, Watched& w, const ProbeResult& result,
             std::chrono::steady_clock::time_point now) REQUIRES(mu_);
  void Run();

  const std::vector<Supervisor*> supervisors_;
  const std::shared_ptr<HealthProber> prober_;
  const HealthMonitorOptions options_;
  const std::shared_ptr<Results> results_ = std::make_shared<Results>();
  util::Mutex mu_;  // one Tick at a time
  std::map<Key, Watched> watched_ GUARDED_BY(mu_);
  util::Mutex stop_mu_;
  util::CondVar stop_cv_;
  bool stopping_ GUARDED_BY(stop_mu_) = false;
  std::thread thread_;
};

}  // namespace pgfleet::hostd::health
