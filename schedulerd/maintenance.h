#pragma once
// The scheduler's housekeeping, each step its own short transaction on the
// work connection: its heartbeat row, the lost-host sweep and drain eviction,
// and pruning old finished jobs.
//
// What must hold: any scheduler may run any step at any time. The sweep is
// safe to race (pgfleet.sweep_lost_hosts lets one scheduler win each host);
// pruning takes a transaction-scoped advisory lock (model::kPruneLockKey) so
// one scheduler at a time deletes. Called by the scheduler loop only.

#include <chrono>
#include <pqxx/pqxx>
#include <string>

#include "core/metrics/metrics.h"
#include "schedulerd/store.h"

namespace pgfleet::schedulerd {

struct MaintenanceConfig {
  std::string scheduler_id;
  // Hosts silent longer than this are lost (<= 0: pgfleet.host_ttl()).
  double host_ttl_seconds = 0;
  std::chrono::seconds retain{7 * 24 * 3600};  // finished jobs older than this are pruned
  std::string metrics_url;  // where its /metrics is served, for pgfleet.schedulers
};

class Maintenance {
 public:
  // metrics must outlive this.
  Maintenance(MaintenanceConfig config, metrics::Registry& metrics)
      : config_(std::move(config)), metrics_(metrics) {}

  // Upserts this scheduler's row in pgfleet.schedulers, and reads the
  // cluster's gauges (jobs and hosts by state, the oldest pending job's age)
  // for /metrics in the same transaction.
  void Heartbeat(pqxx::connection& conn);
  // Marks silent hosts lost and requeues their attempts, and stops jobs on
  // draining hosts past their deadline. Returns true when that freed or
  // requeued work, so every formation should be looked at again.
  bool SweepLostHosts(pqxx::connection& conn);
  // Deletes finished jobs older than the retention, in batches; returns at
  // once when another scheduler is pruning.
  void PruneFinished(pqxx::connection& conn);

 private:
  // Logs and exposes a change of the sweep's guard.
  void ReportGuard(const store::LossGuard& guard);

  MaintenanceConfig config_;
  metrics::Registry& metrics_;
  store::LossGuard guard_;  // as last read
  int foreign_locks_ = 0;   // formations locked by a non-scheduler session, as last counted
};

}  // namespace pgfleet::schedulerd
