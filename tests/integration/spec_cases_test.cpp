// The shared table of spec cases (tests/shared/spec_cases.h) against the
// database: a job inserted with each spec is refused with the same message
// as hostd gives, or accepted when hostd accepts it; a refused insert
// leaves nothing behind. Formation templates obey the same rules.

#include "spec_cases.h"

#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

// An INSERT of the spec $1 (hostd's JSON) into pgfleet.jobs; fields left out
// take the columns' defaults.
const char* kInsertSpec = R"(
  insert into pgfleet.jobs (command, env, constraints, cpu, memory, priority, max_attempts,
                            rootfs, run_as, network, pids_max, stop_grace_seconds,
                            log_max_files, log_max_file_mb, disk, seccomp, ports)
  select array(select jsonb_array_elements_text(s->'command')),
         coalesce(s->'env', '{}'), coalesce(s->'constraints', '{}'),
         coalesce((s->>'cpu')::int, 100), coalesce((s->>'memory')::int, 64),
         coalesce((s->>'priority')::int, 50), coalesce((s->>'max_attempts')::int, 1),
         s->>'rootfs', s->>'user', coalesce(s->>'network', 'host'),
         coalesce((s->>'pids_max')::int, 1024), coalesce((s->>'stop_grace_seconds')::int, 10),
         (s->>'log_max_files')::int, (s->>'log_max_file_mb')::int,
         coalesce((s->>'disk')::int, 0), coalesce(s->>'seccomp', 'default'),
         nullif(s->'ports', 'null')
    from (select $1::jsonb as s) x)";

// Runs sql with $1 = spec; returns the error message, "" if it succeeded.
std::string Try(const TestDatabase& db, const std::string& sql, const std::string& spec) {
  try {
    pqxx::connection c(db.dsn());
    pqxx::work tx(c);
    tx.exec_params(sql, spec);
    tx.commit();
    return "";
  } catch (const pqxx::sql_error& e) {
    return e.what();
  }
}

TEST(SpecCases, TheDatabaseRefusesAtInsertExactlyWhatHostdRefusesWithItsMessage) {
  TestDatabase db;
  long long accepted = 0;
  for (const auto& c : SpecCases()) {
    std::string error = Try(db, kInsertSpec, c.spec);
    if (c.message.empty()) {
      EXPECT_EQ("", error) << c.name;
      ++accepted;
    } else {
      EXPECT_NE(std::string::npos, error.find(c.message)) << c.name << ": got \"" << error << "\"";
    }
  }
  EXPECT_EQ(accepted, db.Count("select count(*) from pgfleet.jobs"));
  EXPECT_EQ(accepted, db.Count("select count(*) from pgfleet.job_events"));
}

TEST(SpecCases, AFormationTemplateObeysTheSameRules) {
  TestDatabase db;
  std::string bad_env = Try(db,
                            "insert into pgfleet.formations (name, kind, replicas, command, env) "
                            "values ('web', 'service', 2, '{sleep,60}', $1::jsonb)",
                            R"({"=x":"y"})");
  EXPECT_NE(std::string::npos, bad_env.find("env names must be non-empty and contain no '='"))
      << bad_env;
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.formations where name = 'web'"));
  db.Scalar(
      "insert into pgfleet.formations (name, kind, replicas, command) values ('web', 'service', "
      "0, '{sleep,60}')");
  std::string too_big = Try(db, "update pgfleet.formations set env = $1::jsonb where name = 'web'",
                            R"({"BIG":")" + std::string(70000, 'v') + R"("})");
  EXPECT_NE(std::string::npos, too_big.find("env must be at most 65536 bytes")) << too_big;
  EXPECT_EQ("{}", db.Scalar("select env from pgfleet.formations where name = 'web'"));
}

}  // namespace
}  // namespace pgfleet::testing
