// `pgfleet migrate` (core/db/migrate.cpp) against the real server: idempotent,
// safe to run concurrently, and it leaves no function that sql/ no longer defines.

#include "core/db/migrate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/db/embedded_sql.h"
#include "core/db/sql_state.h"
#include "core/model/constants.h"
#include "tests/support/test_support.h"

namespace pgfleet {
namespace {

using testing::TestDatabase;

// Columns, functions, constraints, triggers, views and indexes of schema pgfleet.
std::string SchemaFingerprint(const TestDatabase& db) {
  return db.Scalar(R"sql(
    select md5(concat_ws('|',
      (select string_agg(concat_ws(':', table_name, column_name, data_type, is_nullable,
                                   column_default), ',' order by table_name, column_name)
         from information_schema.columns where table_schema = 'pgfleet'),
      (select string_agg(p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' ||
                         md5(pg_get_functiondef(p.oid)), ',' order by p.proname, p.oid::regprocedure::text)
         from pg_proc p where p.pronamespace = 'pgfleet'::regnamespace),
      (select string_agg(c.conrelid::regclass::text || ':' || c.conname, ','
                         order by c.conrelid::regclass::text, c.conname)
         from pg_constraint c where c.connamespace = 'pgfleet'::regnamespace),
      (select string_agg(t.tgrelid::regclass::text || ':' || t.tgname, ','
                         order by t.tgrelid::regclass::text, t.tgname)
         from pg_trigger t join pg_class r on r.oid = t.tgrelid
        where r.relnamespace = 'pgfleet'::regnamespace and not t.tgisinternal),
      (select string_agg(viewname || ':' || md5(definition), ',' order by viewname)
         from pg_views where schemaname = 'pgfleet'),
      (select string_agg(indexname, ',' order by indexname)
         from pg_indexes where schemaname = 'pgfleet')))
  )sql");
}

TEST(Migrate, SecondRunChangesNothing) {
  TestDatabase db;
  db.Scalar("insert into pgfleet.jobs (command, formation) values (array['true'], 'keep')");
  long long migrations = db.Count("select count(*) from pgfleet.schema_migrations");
  EXPECT_GE(migrations, 1);
  std::string before = SchemaFingerprint(db);
  ASSERT_FALSE(before.empty());

  auto conn = db.Connect();
  EXPECT_TRUE(db::Migrate(*conn).empty());

  EXPECT_EQ(db.Count("select count(*) from pgfleet.schema_migrations"), migrations);
  EXPECT_EQ(SchemaFingerprint(db), before);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs where formation = 'keep'"), 1);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.formations where name = 'default'"), 1);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.settings"), 1);
}

void MigrateConcurrently(int threads) {
  TestDatabase db(/*migrate=*/false);
  std::vector<std::unique_ptr<pqxx::connection>> conns;
  for (int i = 0; i < threads; ++i) conns.push_back(db.Connect());
  std::vector<std::string> errors(threads);
  std::vector<std::vector<std::string>> applied(threads);
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] {
      try {
        applied[i] = db::Migrate(*conns[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : workers) t.join();
  size_t total_applied = 0;
  for (int i = 0; i < threads; ++i) {
    EXPECT_EQ(errors[i], "") << "migrate " << i << " failed";
    total_applied += applied[i].size();
  }
  long long migrations = db.Count("select count(*) from pgfleet.schema_migrations");
  EXPECT_GE(migrations, 1);
  EXPECT_EQ(db.Count("select count(distinct name) from pgfleet.schema_migrations"), migrations);
  // Exactly one of the runs applied each migration.
  EXPECT_EQ(static_cast<long long>(total_applied), migrations);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.formations where name = 'default'"), 1);
  EXPECT_EQ(db.Scalar("select pgfleet.lock_class()::text"), std::to_string(model::kLockClass));
}

// A database of an earlier version: the migrations before `first_left`, with
// sql/ applied over them (its triggers and views exist). Today's sql/ stands
// in for that version's: a file of it that names a column or table of a later
// migration is left out (that version's file had no such reference), and so
// is one that calls a function of a file left out or names a later type.
void MigrateUpTo(pqxx::work& tx, const std::string& first_left) {
  tx.exec0("set local client_min_messages = warning");
  tx.exec0("create schema pgfleet");
  tx.exec0(
      "create table pgfleet.schema_migrations (name text primary key, "
      "applied_at timestamptz not null default now())");
  for (const auto& m : db::Migrations()) {
    if (m.name >= first_left) break;
    tx.exec0(m.text);
    tx.exec_params0("insert into pgfleet.schema_migrations (name) values ($1)", m.name);
  }
  for (const auto& o : db::SqlObjects()) {
    try {
      pqxx::subtransaction file(tx, "sql_file");
      file.exec0(o.text);
      file.commit();
    } catch (const pqxx::undefined_table&) {
    } catch (const pqxx::undefined_column&) {
    } catch (const pqxx::undefined_function&) {  // one defined in a file left out
    } catch (const pqxx::sql_error& e) {
      // A type (a domain) of a later migration.
      if (e.sqlstate() != db::sqlstate::kUndefinedObject) throw;
    }
  }
}

// A database of an earlier version (up to `migration`, not included) with
// the rows `setup` writes, then migrated: `migration` must be among those
// applied.
void MigrateWithRows(const TestDatabase& db, const std::string& migration,
                     const std::vector<std::string>& setup) {
  auto conn = db.Connect();
  {
    pqxx::work tx(*conn);
    MigrateUpTo(tx, migration.substr(0, 4));
    for (const auto& sql : setup) tx.exec(sql);
    tx.commit();
  }
  auto applied = db::Migrate(*conn);
  EXPECT_NE(std::find(applied.begin(), applied.end(), migration), applied.end()) << migration;
}

const std::string kTypeOf =
    "select format_type(atttypid, null) from pg_attribute where attrelid = ";

// The statement fails as a check violation naming `rule`.
void ExpectRefused(const TestDatabase& db, const std::string& sql, const std::string& rule) {
  try {
    db.Scalar(sql + "; select 1");
    ADD_FAILURE() << sql << " accepted";
  } catch (const pqxx::check_violation& e) {
    EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << sql << ": " << e.what();
  }
}

// A database of an earlier version (up to 0015) with jobs and formations in
// it takes 0016, whose columns change type under its triggers and views.
TEST(Migrate, ADatabaseWithRowsTakesTheSpecDomains) {
  TestDatabase db(false);
  MigrateWithRows(db, "0016_spec_domains.sql",
                  {"insert into pgfleet.formations (name, kind, replicas, command, env) "
                   "values ('web', 'service', 0, '{sleep,1}', '{\"A\": \"b\"}')",
                   "insert into pgfleet.jobs (command, env, cpu, formation) "
                   "select '{true}', '{\"X\": \"y\"}', 200, 'web' from generate_series(1, 50)"});
  EXPECT_EQ("50", db.Scalar("select count(*) from pgfleet.jobs "
                            "where env = '{\"X\": \"y\"}' and cpu = 200 and formation = 'web'"));
  EXPECT_EQ("pgfleet.spec_env",
            db.Scalar(kTypeOf + "'pgfleet.jobs'::regclass and attname = 'env'"));
  EXPECT_EQ("pgfleet.spec_command",
            db.Scalar(kTypeOf + "'pgfleet.formations'::regclass and attname = 'command'"));
  EXPECT_EQ("1", db.Scalar("select count(*) from pg_trigger "
                           "where tgname = 'formations_check_template'"));
  ExpectRefused(db, "insert into pgfleet.jobs (command, cpu) values ('{true}', 0)",
                "cpu must be > 0");
}

// A database at 0017 with hosts (and their heartbeats and keys, which refer
// to hosts.id) takes 0018: the hosts' one-column rules become domains under
// its views and triggers; the rules still hold, naming themselves, and the
// allocation rules spanning two columns stay table CHECKs.
TEST(Migrate, ADatabaseWithHostsTakesTheHostDomains) {
  TestDatabase db(false);
  MigrateWithRows(
      db, "0018_host_domains.sql",
      // Rows as that version's register_host wrote them (today's needs
      // columns of later migrations).
      {"insert into pgfleet.hosts (id, api_url, cpu, memory, labels, driver)"
       " select 'h' || i, 'http://127.0.0.1:' || (1000 + i), 4000, 4096, '{\"zone\": \"a\"}',"
       " 'process' from generate_series(1, 20) i",
       "insert into pgfleet.host_keys (host_id, key) values ('h1', decode(repeat('00', 32), "
       "'hex'))"});
  EXPECT_EQ("20", db.Scalar("select count(*) from pgfleet.hosts where labels ->> 'zone' = 'a'"));
  EXPECT_EQ("20", db.Scalar("select count(*) from pgfleet.host_status")) << "the view is back";
  EXPECT_EQ("1", db.Scalar("select count(*) from pgfleet.host_keys k join pgfleet.hosts h "
                           "on h.id = k.host_id"));
  for (const char* column : {"id", "api_url", "cpu", "memory", "labels", "state"}) {
    EXPECT_EQ(std::string("pgfleet.host_") + column,
              db.Scalar(kTypeOf + "'pgfleet.hosts'::regclass and attname = '" + column + "'"));
  }
  EXPECT_EQ("1",
            db.Scalar("select count(*) from pg_trigger where tgname = 'hosts_config_changed'"));
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"update pgfleet.hosts set api_url = 'ftp://x' where id = 'h2'",
       "api_url must be an http URL"},
      {"update pgfleet.hosts set labels = '{\"a\": 1}' where id = 'h2'",
       "labels must be an object of strings"},
      {"update pgfleet.hosts set state = 'gone' where id = 'h2'",
       "host state must be up, draining, offline or lost"},
      {"update pgfleet.hosts set cpu = 0 where id = 'h2'", "cpu must be > 0"},
      {"update pgfleet.hosts set cpu_allocated = 4001 where id = 'h2'",
       "cpu_allocated must be between 0 and cpu"},
      {"update pgfleet.hosts set memory_allocated = -1 where id = 'h2'",
       "memory_allocated must be between 0 and memory"},
      {"insert into pgfleet.hosts (id, api_url, cpu, memory) values ('a b', 'http://x', 1, 1)",
       "host id must be 1-100 of A-Z a-z 0-9 . _ -"},
  };
  for (const auto& [sql, rule] : refused) ExpectRefused(db, sql, rule);
  EXPECT_EQ("4000", db.Scalar("select cpu from pgfleet.hosts where id = 'h2'"))
      << "changed nothing";
}

// is_admin knows the schema's owner as the last migrate found it
// (pgfleet.schema_owner), not by a catalog query per call: a new owner is an
// admin once migrate runs again, and a renamed one stays one.
TEST(Migrate, TheSchemasNewOwnerIsAnAdminOnceMigrateRunsAgain) {
  TestDatabase db;
  const std::string login = db.CreateLogin("owner2", {});
  auto is_admin = [&] { return db.Scalar("select pgfleet.is_admin('" + login + "')::text"); };
  EXPECT_EQ(is_admin(), "false");
  db.Scalar("alter schema pgfleet owner to " + login);
  EXPECT_EQ(is_admin(), "false");  // until migrate runs
  auto conn = db.Connect();
  db::Migrate(*conn);
  EXPECT_EQ(is_admin(), "true");
  EXPECT_EQ(db.Scalar("select pgfleet.schema_owner()::regrole::text"), login);
  db.Scalar("alter role " + login + " rename to " + login + "_x");
  EXPECT_EQ(db.Scalar("select pgfleet.is_admin('" + login + "_x')::text"), "true");
  db.Scalar("alter role " + login + "_x rename to " + login);
  // Superusers are admins whoever owns the schema; other roles are not.
  EXPECT_EQ(db.Scalar("select pgfleet.is_admin('postgres')::text"), "true");
  EXPECT_EQ(db.Scalar("select pgfleet.is_admin('pgfleet_host')::text"), "false");
  db.Scalar("alter schema pgfleet owner to current_user");
}

// A database of an earlier version, once migrated, has the schema a new one
// gets: what a migration does to an existing schema (0027 took what was
// history out of sql/) leaves it as sql/ over the migrations leaves a new one.
TEST(Migrate, AnUpgradedDatabaseEndsLikeANewOne) {
  TestDatabase fresh;
  const std::string want = SchemaFingerprint(fresh);
  for (const std::string first_left : {"0005", "0012", "0016", "0019", "0024", "0027"}) {
    TestDatabase db(false);
    auto conn = db.Connect();
    {
      pqxx::work tx(*conn);
      MigrateUpTo(tx, first_left);
      if (first_left == "0027") {
        // As sql/ before it had left an older version's: assign_jobs with its
        // old result columns, which sql/ cannot replace, and an old overload.
        // (Today's sql/013 needs columns of later migrations, so it may have
        // made no assign_jobs here.)
        tx.exec0("drop function if exists pgfleet.assign_jobs(jsonb)");
        tx.exec0(
            "create function pgfleet.assign_jobs(p_plan jsonb)"
            " returns table (job_id bigint, attempt integer, host_id text)"
            " language sql as $$select 1::bigint, 1, 'h'::text$$");
        tx.exec0(
            "create function pgfleet.heartbeat(p_host text, p_generation bigint,"
            " p_running integer) returns text language sql as $$select 'up'$$");
      }
      tx.commit();
    }
    db::Migrate(*conn);
    EXPECT_EQ(SchemaFingerprint(db), want) << "a database before " << first_left;
  }
}

TEST(Migrate, TwoConcurrentRunsBothSucceed) { MigrateConcurrently(2); }

TEST(Migrate, FourConcurrentRunsAllSucceed) { MigrateConcurrently(4); }

// --- Stale functions --------------------------------------------------------

long long FunctionsNamed(const TestDatabase& db, const std::string& name) {
  return db.Count(
      "select count(*) from pg_proc where pronamespace = 'pgfleet'::regnamespace"
      " and proname = '" +
      name + "'");
}

TEST(Migrate, DropsFunctionsAndOverloadsThatSqlNoLongerDefines) {
  TestDatabase db;
  long long functions =
      db.Count("select count(*) from pg_proc where pronamespace = 'pgfleet'::regnamespace");
  ASSERT_EQ(FunctionsNamed(db, "setting"), 1);
  // As an older sql/ might have left them: a function since removed, and an
  // overload of a current one with other argument types.
  db.Scalar("create function pgfleet.stale_fn(integer) returns integer language sql as 'select 1'");
  db.Scalar(
      "create function pgfleet.setting(p_name text, p_default integer) returns text "
      "language sql as 'select null::text'");
  db.Scalar("create procedure pgfleet.stale_proc() language sql as 'select 1'");
  ASSERT_EQ(FunctionsNamed(db, "stale_fn"), 1);
  ASSERT_EQ(FunctionsNamed(db, "setting"), 2);

  auto conn = db.Connect();
  db::Migrate(*conn);

  EXPECT_EQ(FunctionsNamed(db, "stale_fn"), 0);
  EXPECT_EQ(FunctionsNamed(db, "stale_proc"), 0);
  EXPECT_EQ(FunctionsNamed(db, "setting"), 1);
  EXPECT_EQ(db.Scalar("select pgfleet.setting('host_ttl_seconds', 'x')"), "10");
  EXPECT_EQ(db.Count("select count(*) from pg_proc where pronamespace = 'pgfleet'::regnamespace"),
            functions);
}

TEST(Migrate, LeavesFunctionsOfExtensionsInTheSchema) {
  TestDatabase db;
  db.Scalar("create extension citext schema pgfleet");
  long long citext = db.Count(
      "select count(*) from pg_depend where deptype = 'e' and classid = 'pg_proc'::regclass"
      " and refobjid = (select oid from pg_extension where extname = 'citext')");
  ASSERT_GT(citext, 0);
  auto conn = db.Connect();
  db::Migrate(*conn);
  EXPECT_EQ(db.Count("select count(*) from pg_proc p join pg_depend d on d.objid = p.oid"
                     " and d.classid = 'pg_proc'::regclass and d.deptype = 'e'"
                     " where p.pronamespace = 'pgfleet'::regnamespace"),
            citext);
  EXPECT_EQ(db.Scalar("select pgfleet.citext_eq('A', 'a')"), "t");
}

TEST(Migrate, StaleFunctionSomethingDependsOnFailsNamingItAndChangesNothing) {
  TestDatabase db;
  db.Scalar("create function pgfleet.stale_fn(integer) returns integer language sql as 'select 1'");
  db.Scalar("create view public.uses_stale as select pgfleet.stale_fn(1) as one");
  std::string error;
  auto conn = db.Connect();
  try {
    db::Migrate(*conn);
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("sql/ no longer defines function pgfleet.stale_fn(integer)"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("uses_stale"), std::string::npos) << error;
  EXPECT_EQ(FunctionsNamed(db, "stale_fn"), 1);
  EXPECT_EQ(db.Scalar("select one from public.uses_stale"), "1");
}

}  // namespace
}  // namespace pgfleet
