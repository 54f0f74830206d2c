#include "schedulerd/maintenance.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "schedulerd/store.h"

namespace pgfleet::schedulerd {
namespace {

// How long a session that is not a scheduler's may hold a formation's lock
// before its jobs say so (a scheduler's pass holds it for well under this).
constexpr double kForeignLockGraceSeconds = 10;

// Rows deleted per prune transaction, and transactions per PruneFinished call.
constexpr int kPruneBatch = 1000;
constexpr int kPruneBatchesPerCall = 20;

}  // namespace

void Maintenance::Heartbeat(pqxx::connection& conn) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  pqxx::work tx(conn);
  store::Heartbeat(tx, config_.scheduler_id, host, static_cast<int>(getpid()), config_.metrics_url);
  const store::ClusterGauges gauges = store::ReadClusterGauges(tx);
  tx.commit();
  for (const auto& [state, n] : gauges.jobs) {
    metrics_.Set("pgfleet_jobs{state=\"" + state + "\"}", n);
  }
  for (const auto& [state, n] : gauges.hosts) {
    metrics_.Set("pgfleet_hosts{state=\"" + state + "\"}", n);
  }
  metrics_.Set("pgfleet_oldest_pending_job_age_seconds", gauges.oldest_pending_seconds);
}

bool Maintenance::SweepLostHosts(pqxx::connection& conn) {
  pqxx::work tx(conn);
  double ttl = config_.host_ttl_seconds;
  if (ttl <= 0) ttl = store::HostTtlSeconds(tx);
  auto lost = store::SweepLostHosts(tx, ttl);
  store::LossGuard guard = store::ReadLossGuard(tx);
  int evicted = store::EvictOverdueDrains(tx);
  const int foreign = store::NoteForeignFormationLocks(tx, kForeignLockGraceSeconds);
  const int settled = store::SettleDependencies(tx);
  tx.commit();
  if (settled > 0) {
    spdlog::info("{} jobs waiting for others released or failed by the sweep", settled);
  }
  metrics_.Set("pgfleet_scheduler_formation_locks_held_elsewhere", foreign);
  if (foreign > 0 && foreign_locks_ == 0) {
    spdlog::warn(
        "{} formation(s) locked by a session that is not a scheduler's: their jobs wait "
        "(select * from pgfleet.formation_locks where not is_scheduler)",
        foreign);
  }
  foreign_locks_ = foreign;
  if (evicted > 0) {
    spdlog::info("{} jobs on draining hosts past their deadline are being stopped and requeued",
                 evicted);
  }
  ReportGuard(guard);
  for (const auto& h : lost) {
    metrics_.Add("pgfleet_scheduler_hosts_lost_total", 1);
    metrics_.Add("pgfleet_scheduler_jobs_lost_total", h.requeued);
    spdlog::warn("host={} lost: no heartbeat for {}s; {} attempts requeued", h.host_id, ttl,
                 h.requeued);
  }
  return evicted > 0 || settled > 0 || !lost.empty();
}

void Maintenance::ReportGuard(const store::LossGuard& guard) {
  metrics_.Set("pgfleet_scheduler_host_loss_held_hosts", guard.held ? guard.held_hosts : 0);
  metrics_.Set("pgfleet_scheduler_hosts_waiting_for_loss_rate", guard.waiting_for_rate);
  if (guard.held && !guard_.held) {
    metrics_.Add("pgfleet_scheduler_host_loss_holds_total", 1);
    spdlog::warn(
        "{} of {} hosts missed heartbeats at once: treating it as a control-plane outage, none is "
        "declared lost until heartbeats resume (pgfleet.host_loss_events)",
        guard.held_hosts, guard.of_hosts);
  } else if (!guard.held && guard_.held) {
    spdlog::info("host heartbeats resumed: silent hosts are judged one by one again");
  }
  if (guard.waiting_for_rate > 0 && guard_.waiting_for_rate == 0) {
    spdlog::warn("{} silent hosts wait for the host loss rate limit (pgfleet.host_loss_events)",
                 guard.waiting_for_rate);
  }
  guard_ = guard;
}

void Maintenance::PruneFinished(pqxx::connection& conn) {
  int total = 0;
  for (int batch = 0; batch < kPruneBatchesPerCall; ++batch) {
    pqxx::work tx(conn);
    if (!store::TryLockPrune(tx)) return;  // another scheduler is pruning
    int n = store::PruneFinished(tx, static_cast<double>(config_.retain.count()), kPruneBatch);
    store::ForgetRetired(tx);
    tx.commit();
    total += n;
    if (n < kPruneBatch) break;
  }
  if (total > 0) {
    metrics_.Add("pgfleet_scheduler_jobs_pruned_total", total);
    spdlog::info("scheduler={} pruned {} finished jobs older than {}s", config_.scheduler_id, total,
                 config_.retain.count());
  }
}

}  // namespace pgfleet::schedulerd
