// schedulerd's store, the maintenance part (store.h, "maintenance"): the
// scheduler's own heartbeat, lost hosts and overdue drains, and pruning. Its
// statements (store_maintenance.sql) are prepared with the rest by Prepare.

#include "core/db/statements.h"
#include "core/model/constants.h"
#include "schedulerd/store.h"
#include "schedulerd/store_maintenance.sql.h"

namespace pgfleet::schedulerd::store {

void PrepareMaintenance(pqxx::connection& conn) {
  db::PrepareAll(
      conn, {&kHeartbeat, &kHostTtlSeconds, &kSweepLostHosts, &kReadLossGuard,
             &kNoteForeignFormationLocks, &kEvictOverdueDrains, &kTryLockPrune, &kPruneFinished,
             &kForgetStaleSchedulers, &kPruneDeletedFormations, &kClusterGauges, &kSettleDependencies});
}

void Heartbeat(pqxx::transaction_base& tx, const std::string& scheduler_id,
               const std::string& hostname, int pid, const std::string& metrics_url) {
  db::Exec0(tx, kHeartbeat, scheduler_id, hostname, pid, db::NullIfEmpty(metrics_url));
}

double HostTtlSeconds(pqxx::transaction_base& tx) {
  return db::Exec1(tx, kHostTtlSeconds)["seconds"].as<double>();
}

ClusterGauges ReadClusterGauges(pqxx::transaction_base& tx) {
  ClusterGauges out;
  for (const auto& row : db::Exec(tx, kClusterGauges)) {
    const std::string kind = row["kind"].as<std::string>();
    const double value = row["value"].as<double>();
    if (kind == "jobs") out.jobs[row["state"].as<std::string>()] = value;
    if (kind == "hosts") out.hosts[row["state"].as<std::string>()] = value;
    if (kind == "oldest_pending") out.oldest_pending_seconds = value;
  }
  return out;
}

std::vector<LostHost> SweepLostHosts(pqxx::transaction_base& tx, double ttl_seconds) {
  auto rows = db::Exec(tx, kSweepLostHosts, ttl_seconds);
  std::vector<LostHost> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    out.push_back({r["host_id"].as<std::string>(), r["requeued"].as<int>()});
  }
  return out;
}

LossGuard ReadLossGuard(pqxx::transaction_base& tx) {
  auto r = db::Exec1(tx, kReadLossGuard);
  return {r["held"].as<bool>(), r["held_hosts"].as<int>(), r["of_hosts"].as<int>(),
          r["waiting_for_rate"].as<int>()};
}

int NoteForeignFormationLocks(pqxx::transaction_base& tx, double grace_seconds) {
  return db::Exec1(tx, kNoteForeignFormationLocks, grace_seconds)["held"].as<int>();
}

int EvictOverdueDrains(pqxx::transaction_base& tx) {
  return db::Exec1(tx, kEvictOverdueDrains)["evicted"].as<int>();
}

int SettleDependencies(pqxx::transaction_base& tx) {
  return db::Exec1(tx, kSettleDependencies)["settled"].as<int>();
}

bool TryLockPrune(pqxx::transaction_base& tx) {
  return db::Exec1(tx, kTryLockPrune, model::kLockClass, model::kPruneLockKey)["locked"].as<bool>();
}

int PruneFinished(pqxx::transaction_base& tx, double retain_seconds, int limit) {
  return db::Exec1(tx, kPruneFinished, retain_seconds, limit)["pruned"].as<int>();
}

void ForgetRetired(pqxx::transaction_base& tx) {
  db::Exec0(tx, kForgetStaleSchedulers);
  db::Exec(tx, kPruneDeletedFormations);
}

}  // namespace pgfleet::schedulerd::store
