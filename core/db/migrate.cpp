#include "core/db/migrate.h"

#include <stdexcept>

#include "core/db/embedded_sql.h"
#include "core/model/constants.h"

namespace pgfleet::db {

namespace {

// Every function sql/ defines is written with CREATE OR REPLACE, which rewrites
// its pg_proc row even when nothing changed: after sql/ ran, exactly the rows
// this transaction wrote have its transaction id as xmin, and any other
// function of the schema is one sql/ no longer defines. (sql/ must therefore
// not run in subtransactions, whose rows would carry another xmin.)
void DropStaleFunctions(pqxx::work& tx) {
  auto stale = tx.exec(
      "select case p.prokind when 'a' then 'aggregate' when 'p' then 'procedure'"
      "                      else 'function' end,"
      "       format('%I.%I(%s)', n.nspname, p.proname, pg_get_function_identity_arguments(p.oid))"
      "  from pg_proc p join pg_namespace n on n.oid = p.pronamespace"
      " where n.nspname = 'pgfleet' and p.xmin <> pg_current_xact_id()::xid"
      "   and not exists (select 1 from pg_depend d where d.classid = 'pg_proc'::regclass"
      "                      and d.objid = p.oid and d.deptype = 'e')"
      " order by 2");
  for (const auto& row : stale) {
    std::string what = row[0].as<std::string>() + " " + row[1].as<std::string>();
    try {
      tx.exec0("drop " + what);
    } catch (const pqxx::sql_error& e) {
      throw std::runtime_error("sql/ no longer defines " + what +
                               ", but it cannot be dropped (nothing was migrated): " + e.what() +
                               "Drop or change what depends on it, then run migrate again.");
    }
  }
}

}  // namespace

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
  DropStaleFunctions(tx);
  tx.commit();
  return applied;
}

}  // namespace pgfleet::db
