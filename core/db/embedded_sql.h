#pragma once
// The SQL files of migrations/ and sql/, compiled into every binary.

#include <string>
#include <vector>

namespace pgfleet::db {

struct SqlFile {
  std::string name;  // file name, e.g. "0001_init.sql"; order of application
  std::string text;
};

// migrations/*.sql in name order: each applied once, recorded in pgfleet.schema_migrations.
const std::vector<SqlFile>& Migrations();
// sql/*.sql in name order: views, functions and triggers, re-created on every migrate.
const std::vector<SqlFile>& SqlObjects();
// sql/ops/*.sql: ready-made operator queries (not executed by migrate).
const std::vector<SqlFile>& OpsQueries();

}  // namespace pgfleet::db
