#include "core/db/migrate.h"

#include <stdexcept>

#include "core/db/embedded_sql.h"
#include "core/db/queries.sql.h"
#include "core/model/constants.h"

namespace pgfleet::db {

namespace {

// Every function sql/ defines is written with CREATE OR REPLACE, which rewrites
// its pg_proc row even when nothing changed: after sql/ ran, exactly the rows
// this transaction wrote have its transaction id as xmin, and any other
// function of the schema is one sql/ no longer defines. (sql/ must therefore
// not run in subtransactions, whose rows would carry another xmin.)
void DropStaleFunctions(pqxx::work& tx) {
  for (const auto& row : tx.exec(kMigrateStaleFunctions.sql)) {
    std::string what = row["what"].as<std::string>();
    try {
      tx.exec0(row["drop_statement"].as<std::string>());
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
  tx.exec(kMigrateQuietNotices.sql);
  tx.exec_params(kMigrateLock.sql, model::kLockClass, model::kMigrateLockKey);
  tx.exec0(kMigrateCreateSchema.sql);
  tx.exec0(kMigrateCreateHistory.sql);
  for (const auto& m : Migrations()) {
    if (!tx.exec_params(kMigrateWasApplied.sql, m.name).empty()) continue;
    tx.exec0(m.text);
    tx.exec_params0(kMigrateRecordApplied.sql, m.name);
    applied.push_back(m.name);
  }
  for (const auto& o : SqlObjects()) tx.exec0(o.text);
  DropStaleFunctions(tx);
  tx.commit();
  return applied;
}

}  // namespace pgfleet::db
