// Every statement each process runs, from its .sql file (the lists the build
// generates, cmake/embed_queries.cmake), prepared on a migrated database:
// a statement that names a column, table, function or type the schema lacks,
// or that does not parse, fails here, not in a daemon at run time.

#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <set>
#include <string>

#include "cli/queries.sql.h"
#include "cli/ui/ui_queries.sql.h"
#include "core/db/queries.sql.h"
#include "hostd/agent/store.sql.h"
#include "schedulerd/store.sql.h"
#include "schedulerd/store_maintenance.sql.h"
#include "schedulerd/store_preemption.sql.h"
#include "schedulerd/store_rollout.sql.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

struct File {
  const char* path;
  const db::Statement* const* begin;
  size_t count;
};

template <size_t N>
File Of(const char* path, const db::Statement* const (&list)[N]) {
  return {path, list, N};
}

TEST(EveryStatement, EachProcessStatementPreparesOnAMigratedDatabase) {
  TestDatabase db;
  auto conn = db.Connect();
  const File files[] = {
      Of("schedulerd/store.sql", schedulerd::store::kStoreSqlStatements),
      Of("schedulerd/store_maintenance.sql", schedulerd::store::kStoreMaintenanceSqlStatements),
      Of("schedulerd/store_rollout.sql", schedulerd::store::kStoreRolloutSqlStatements),
      Of("schedulerd/store_preemption.sql", schedulerd::store::kStorePreemptionSqlStatements),
      Of("hostd/agent/store.sql", hostd::store::kStoreSqlStatements),
      Of("cli/queries.sql", cli::kQueriesSqlStatements),
      Of("cli/ui/ui_queries.sql", cli::ui::kUiQueriesSqlStatements),
      Of("core/db/queries.sql", db::kQueriesSqlStatements),
  };
  std::set<std::string> names;
  size_t prepared = 0;
  for (const File& f : files) {
    ASSERT_GT(f.count, 0u) << f.path;
    for (size_t i = 0; i < f.count; ++i) {
      const db::Statement& s = *f.begin[i];
      EXPECT_TRUE(names.insert(s.name).second) << s.name << " is named twice (" << f.path << ")";
      try {
        const std::string sql = s.sql;
        const std::string first = sql.substr(0, sql.find_first_of(" \n"));
        if (first == "create" || first == "set") {
          // Utility statements (migrate's) cannot be prepared: run, then rolled back.
          pqxx::work tx(*conn);
          tx.exec0(sql);
        } else {
          // PREPARE with no parameter types, as libpq's PQprepare that the
          // daemons use (libpqxx's own prepare defers it to the first call).
          pqxx::nontransaction tx(*conn);
          tx.exec0("prepare " + tx.quote_name(s.name) + " as " + sql);
        }
        ++prepared;
      } catch (const std::exception& e) {
        ADD_FAILURE() << f.path << ": " << s.name << " does not prepare: " << e.what();
      }
    }
  }
  // Every statement the daemons and the CLI define (71 when this test was written).
  EXPECT_GE(prepared, 60u);
}

}  // namespace
}  // namespace pgfleet::testing
