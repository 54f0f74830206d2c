#include "schedulerd/maintenance.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "schedulerd/store.h"

namespace pgfleet::schedulerd {
namespace {

// Rows deleted per prune transaction, and transactions per PruneFinished call.
constexpr int kPruneBatch = 1000;
constexpr int kPruneBatchesPerCall = 20;

}  // namespace

void Maintenance::Heartbeat(pqxx::connection& conn) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  pqxx::work tx(conn);
  store::Heartbeat(tx, config_.scheduler_id, host, static_cast<int>(getpid()), config_.metrics_url);
  tx.commit();
}

bool Maintenance::SweepLostHosts(pqxx::connection& conn) {
  pqxx::work tx(conn);
  double ttl = config_.host_ttl_seconds;
  if (ttl <= 0) ttl = store::HostTtlSeconds(tx);
  auto lost = store::SweepLostHosts(tx, ttl);
  int evicted = store::EvictOverdueDrains(tx);
  tx.commit();
  if (evicted > 0) {
    spdlog::info("{} jobs on draining hosts past their deadline are being stopped and requeued",
                 evicted);
  }
  for (const auto& h : lost) {
    metrics_.Add("pgfleet_scheduler_hosts_lost_total", 1);
    metrics_.Add("pgfleet_scheduler_jobs_lost_total", h.requeued);
    spdlog::warn("host={} lost: no heartbeat for {}s; {} attempts requeued", h.host_id, ttl,
                 h.requeued);
  }
  return evicted > 0 || !lost.empty();
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
