// schedulerd's store, the maintenance part (store.h, "maintenance"): the
// scheduler's own heartbeat, lost hosts and overdue drains, and pruning. The
// statements are prepared with the rest by Prepare.

#include "core/db/statements.h"
#include "core/model/constants.h"
#include "schedulerd/store.h"

namespace pgfleet::schedulerd::store {
namespace {

constexpr db::Statement kHeartbeat{
    "schedulerd_heartbeat",
    "insert into pgfleet.schedulers (id, hostname, pid, metrics_url) values ($1, $2, $3, $4)"
    " on conflict (id) do update set last_seen = now(), hostname = excluded.hostname,"
    " pid = excluded.pid, metrics_url = excluded.metrics_url"};

constexpr db::Statement kHostTtlSeconds{
    "schedulerd_host_ttl_seconds",
    "select extract(epoch from pgfleet.host_ttl())::float8 as seconds"};

constexpr db::Statement kSweepLostHosts{
    "schedulerd_sweep_lost_hosts", "select host_id, requeued from pgfleet.sweep_lost_hosts($1)"};

constexpr db::Statement kReadLossGuard{
    "schedulerd_read_loss_guard",
    "select held_since is not null as held, held_hosts, of_hosts, waiting_for_rate"
    "  from pgfleet.host_loss_guard"};

constexpr db::Statement kNoteForeignFormationLocks{
    "schedulerd_note_foreign_formation_locks",
    "select pgfleet.note_foreign_formation_locks(make_interval(secs => $1)) as held"};

constexpr db::Statement kEvictOverdueDrains{"schedulerd_evict_overdue_drains",
                                            "select pgfleet.evict_overdue_drains() as evicted"};

constexpr db::Statement kTryLockPrune{"schedulerd_try_lock_prune",
                                      "select pg_try_advisory_xact_lock($1, $2) as locked"};

constexpr db::Statement kPruneFinished{
    "schedulerd_prune_finished",
    "select pgfleet.prune_finished(make_interval(secs => $1), $2) as pruned"};

constexpr db::Statement kForgetStaleSchedulers{
    "schedulerd_forget_stale_schedulers",
    "delete from pgfleet.schedulers where last_seen < now() - interval '1 day'"};

constexpr db::Statement kPruneDeletedFormations{"schedulerd_prune_deleted_formations",
                                                "select pgfleet.prune_deleted_formations()"};

}  // namespace

void PrepareMaintenance(pqxx::connection& conn) {
  db::PrepareAll(
      conn, {&kHeartbeat, &kHostTtlSeconds, &kSweepLostHosts, &kReadLossGuard, &kNoteForeignFormationLocks,
             &kEvictOverdueDrains, &kTryLockPrune,
             &kPruneFinished, &kForgetStaleSchedulers, &kPruneDeletedFormations});
}

void Heartbeat(pqxx::transaction_base& tx, const std::string& scheduler_id,
               const std::string& hostname, int pid, const std::string& metrics_url) {
  db::Exec0(tx, kHeartbeat, scheduler_id, hostname, pid, db::NullIfEmpty(metrics_url));
}

double HostTtlSeconds(pqxx::transaction_base& tx) {
  return db::Exec1(tx, kHostTtlSeconds)["seconds"].as<double>();
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
