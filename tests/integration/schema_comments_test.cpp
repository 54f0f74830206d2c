// The schema documents itself: every table, column, view and function of
// the pgfleet schema has a COMMENT ON, so \d+ in psql explains it to
// operators.

#include <gtest/gtest.h>

#include "schema_probes.h"

namespace pgfleet::testing_schema {
namespace {

TEST(Comments, EveryTableAndColumnIsDocumented) {
  TestDatabase db;
  auto conn = db.Connect();
  pqxx::work tx(*conn);
  auto tables = tx.exec(
      "select c.relname from pg_class c "
      " where c.relnamespace = 'pgfleet'::regnamespace and c.relkind = 'r' "
      "   and coalesce(obj_description(c.oid, 'pg_class'), '') = '' order by 1");
  for (const auto& row : tables)
    ADD_FAILURE() << "table without comment: pgfleet." << row[0].c_str();
  auto columns = tx.exec(
      "select c.relname || '.' || a.attname from pg_class c "
      "  join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped "
      " where c.relnamespace = 'pgfleet'::regnamespace and c.relkind = 'r' "
      "   and coalesce(col_description(c.oid, a.attnum), '') = '' order by 1");
  for (const auto& row : columns)
    ADD_FAILURE() << "column without comment: pgfleet." << row[0].c_str();
  EXPECT_GT(tx.exec1("select count(*) from pg_class where relnamespace = 'pgfleet'::regnamespace "
                     "and relkind = 'r'")[0]
                .as<int>(),
            5);
}

TEST(Comments, EveryViewAndFunctionIsDocumented) {
  TestDatabase db;
  auto conn = db.Connect();
  pqxx::work tx(*conn);
  auto views = tx.exec(
      "select c.relname from pg_class c "
      " where c.relnamespace = 'pgfleet'::regnamespace and c.relkind in ('v', 'm') "
      "   and coalesce(obj_description(c.oid, 'pg_class'), '') = '' order by 1");
  for (const auto& row : views) ADD_FAILURE() << "view without comment: pgfleet." << row[0].c_str();
  auto functions = tx.exec(
      "select p.oid::regprocedure::text from pg_proc p "
      " where p.pronamespace = 'pgfleet'::regnamespace "
      "   and coalesce(obj_description(p.oid, 'pg_proc'), '') = '' order by 1");
  for (const auto& row : functions) ADD_FAILURE() << "function without comment: " << row[0].c_str();
  EXPECT_GE(tx.exec1("select count(*) from pg_class where relnamespace = 'pgfleet'::regnamespace "
                     "and relkind = 'v'")[0]
                .as<int>(),
            4);
}

}  // namespace
}  // namespace pgfleet::testing_schema
