#include "core/db/migrate.h"

#include "core/model/constants.h"
#include "core/db/embedded_sql.h"

namespace pgfleet::db {

std::vector<std::string> Migrate(pqxx::connection& conn) {
  std::vector<std::string> applied;
  pqxx::work tx(conn, "migrate");
  // Quiet NOTICEs such as "schema already exists, skipping".
  tx.exec("set local client_min_messages = warning");
  tx.exec_params("select pg_advisory_xact_lock($1, $2)", model::kLockClass, model::kMigrateLockKey);
  tx.exec0("create schema if not exists pgfleet");
  tx.exec0(
      "create table if not exists pgfleet.schema_migrations ("
      " name text primary key, applied_at timestamptz not null default now())");
  for (const auto& m : Migrations()) {
    auto r = tx.exec_params("select 1 from pgfleet.schema_migrations where name = $1", m.name);
    if (!r.empty()) continue;
    tx.exec0(m.text);
    tx.exec_params0("insert into pgfleet.schema_migrations (name) values ($1)", m.name);
    applied.push_back(m.name);
  }
  for (const auto& o : SqlObjects()) tx.exec0(o.text);
  tx.commit();
  return applied;
}

}  // namespace pgfleet::db
