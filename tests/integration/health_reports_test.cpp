// Health reports (kind health, core/model/report.h) applied by
// pgfleet.report_jobs (sql/014_reports.sql) against the real server: written
// only when the health changes, only for the job's current attempt on the
// reporting host; a new attempt starts unknown. And the column's rules
// (pgfleet.spec_health_check, migrations/0031_health_checks.sql) refusing
// hostile checks by name.

#include <gtest/gtest.h>

#include <string>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

json Health(long long job, int attempt, const std::string& health, const std::string& output) {
  return {{"job", job},
          {"attempt", attempt},
          {"kind", "health"},
          {"health", health},
          {"output", output}};
}

// The row's version: changes with every write of it.
std::string Version(Sql& sql, long long job) {
  return sql.Str("select xmin::text || '/' || ctid::text from pgfleet.jobs where id = $1", job);
}

// Host h1 registered (*gen) and one job (*job) running there, attempt 1.
void StartOneJob(Sql& sql, long long* gen, long long* job) {
  *gen = sql.RegisterHost("h1", 1000, 1000);
  *job = sql.Submit(100, 10);
  ASSERT_EQ(sql.Assign({*job}, "h1").size(), 1u);
  ASSERT_TRUE(sql.ReportOne("h1", *gen, Running(*job, 1)));
}

TEST(HealthReports, WrittenOnlyWhenTheHealthChanges) {
  TestDatabase db;
  Sql sql(db);
  long long gen = 0, job = 0;
  ASSERT_NO_FATAL_FAILURE(StartOneJob(sql, &gen, &job));
  EXPECT_EQ(sql.Str("select health from pgfleet.jobs where id = $1", job), "unknown");

  EXPECT_TRUE(sql.ReportOne("h1", gen, Health(job, 1, "healthy", "ok")));
  EXPECT_EQ(sql.Str("select health || ' ' || health_output || ' ' || (health_at is not null) "
                    "from pgfleet.jobs where id = $1",
                    job),
            "healthy ok true");
  EXPECT_EQ(sql.Events(job, "health"), 1);

  // The same again: accepted, nothing written (the row keeps its version).
  const std::string before = Version(sql, job);
  EXPECT_TRUE(sql.ReportOne("h1", gen, Health(job, 1, "healthy", "still ok")));
  EXPECT_EQ(Version(sql, job), before);
  EXPECT_EQ(sql.Events(job, "health"), 1);

  EXPECT_TRUE(sql.ReportOne("h1", gen, Health(job, 1, "unhealthy", "exit code 1")));
  EXPECT_EQ(sql.Str("select health || ': ' || health_output from pgfleet.jobs where id = $1", job),
            "unhealthy: exit code 1");
  EXPECT_EQ(sql.Str("select detail from pgfleet.job_events where job_id = $1 and kind = 'health' "
                    "order by id desc limit 1",
                    job),
            "unhealthy: exit code 1");
  EXPECT_EQ(sql.State(job), "running");  // health alone never ends an attempt
}

TEST(HealthReports, StaleAttemptsReportChangesNothing) {
  TestDatabase db;
  Sql sql(db);
  long long gen = sql.RegisterHost("h1", 1000, 1000);
  long long gen2 = sql.RegisterHost("h2", 1000, 1000);
  long long job = sql.Submit(100, 10, 3);
  ASSERT_EQ(sql.Assign({job}, "h1").size(), 1u);
  ASSERT_TRUE(sql.ReportOne("h1", gen, Running(job, 1)));
  ASSERT_TRUE(sql.ReportOne("h1", gen, Health(job, 1, "healthy", "")));
  long long events = sql.Num("select count(*) from pgfleet.job_events");
  const std::string before = Version(sql, job);

  EXPECT_FALSE(sql.ReportOne("h1", gen, Health(job, 2, "unhealthy", "x")));      // wrong attempt
  EXPECT_FALSE(sql.ReportOne("h2", gen2, Health(job, 1, "unhealthy", "x")));     // wrong host
  EXPECT_FALSE(sql.ReportOne("h1", gen + 1, Health(job, 1, "unhealthy", "x")));  // old generation
  json other_uid = Health(job, 1, "unhealthy", "x");
  other_uid["uid"] = "00000000-0000-0000-0000-000000000001";
  EXPECT_FALSE(sql.ReportOne("h1", gen, other_uid));  // another database's job of that id
  EXPECT_EQ(Version(sql, job), before);
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.job_events"), events);

  // The attempt ends and the job is retried: its report is stale now, and
  // the next attempt starts unknown.
  ASSERT_TRUE(sql.ReportOne("h1", gen, Exited(job, 1, 1)));
  EXPECT_FALSE(sql.ReportOne("h1", gen, Health(job, 1, "unhealthy", "late")));
  EXPECT_EQ(sql.Str("select health from pgfleet.jobs where id = $1", job), "healthy");
  sql.Exec("update pgfleet.jobs set not_before = null where id = $1", job);
  ASSERT_EQ(sql.Assign({job}, "h2").size(), 1u);
  EXPECT_EQ(sql.Str("select health || coalesce(health_output, '-') || coalesce(health_at::text, "
                    "'-') from pgfleet.jobs where id = $1",
                    job),
            "unknown--");
}

TEST(HealthReports, MixedWithOtherReportsInOneBatch) {
  TestDatabase db;
  Sql sql(db);
  long long gen = sql.RegisterHost("h1", 1000, 1000);
  long long a = sql.Submit(100, 10);
  long long b = sql.Submit(100, 10);
  ASSERT_EQ(sql.Assign({a, b}, "h1").size(), 2u);
  // a: running and healthy in one batch; b: running, then healthy, then exited.
  auto answers =
      sql.ReportJobs("h1", gen,
                     json::array({Running(a, 1), Running(b, 1), Health(a, 1, "unhealthy", "first"),
                                  Health(a, 1, "healthy", "last wins"), Health(b, 1, "healthy", ""),
                                  Exited(b, 1, 0)}));
  ASSERT_EQ(answers.size(), 6u);
  for (const auto& r : answers) EXPECT_TRUE(r.accepted) << r.job << " " << r.kind;
  EXPECT_EQ(sql.State(a), "running");
  EXPECT_EQ(sql.Str("select health || ' ' || health_output from pgfleet.jobs where id = $1", a),
            "healthy last wins");
  EXPECT_EQ(sql.Events(a, "health"), 1);
  EXPECT_EQ(sql.State(b), "succeeded");
  EXPECT_EQ(sql.Allocated("h1"), "100/10");
  EXPECT_EQ(sql.Drift(), 0);
}

TEST(HealthReports, OutputIsBoundedAndHealthMustBeKnown) {
  TestDatabase db;
  Sql sql(db);
  long long gen = 0, job = 0;
  ASSERT_NO_FATAL_FAILURE(StartOneJob(sql, &gen, &job));
  EXPECT_TRUE(sql.ReportOne("h1", gen, Health(job, 1, "unhealthy", std::string(100000, 'x'))));
  EXPECT_LE(sql.Num("select octet_length(health_output) from pgfleet.jobs where id = $1", job),
            4096);
  EXPECT_NE(sql.ErrorOf("select * from pgfleet.report_jobs('h1', $1, $2::jsonb)", gen,
                        json::array({Health(job, 1, "fine", "")}).dump()),
            "");
}

TEST(HealthCheckColumn, RefusesHostileChecksNamingTheRule) {
  TestDatabase db;
  Sql sql(db);
  auto refused = [&](const std::string& check, const std::string& rule) {
    SCOPED_TRACE(check.substr(0, 120));
    std::string error =
        sql.ErrorOf("select pgfleet.submit(array['srv'], health_check => $1::jsonb)", check);
    EXPECT_NE(error.find(rule), std::string::npos) << error;
  };
  refused(R"([1])", "health_check must be an object");
  refused(R"("cat /ready")", "health_check must be an object");
  refused(R"({"type":"exec"})", "health_check.type must be command, http or tcp");
  refused(R"({"type":"tcp","port":0})", "health_check.port must be 1-65535");
  refused(R"({"type":"tcp","port":70000})", "health_check.port must be 1-65535");
  refused(R"({"type":"tcp","port":"80"})", "health_check.port must be 1-65535");
  refused(R"({"type":"tcp","port":80.5})", "health_check.port must be 1-65535");
  refused(R"({"type":"tcp","port":80,"interval_seconds":-1})",
          "health_check.interval_seconds must be between 1 and 86400");
  refused(R"({"type":"tcp","port":80,"interval_seconds":"10"})",
          "health_check.interval_seconds must be between 1 and 86400");
  refused(R"({"type":"tcp","port":80,"timeout_seconds":0})",
          "health_check.timeout_seconds must be between 1 and 3600");
  refused(R"({"type":"tcp","port":80,"failure_threshold":1000})",
          "health_check.failure_threshold must be between 1 and 100");
  refused(R"({"type":"tcp","port":80,"grace_seconds":-1})",
          "health_check.grace_seconds must be between 0 and 86400");
  refused(R"({"type":"command"})", "health_check.command must be 1-64 strings");
  refused(R"({"type":"command","command":[1]})", "health_check.command must be 1-64 strings");
  refused(R"({"type":"command","command":[""]})", "health_check.command must be 1-64 strings");
  refused(R"({"type":"command","command":[")" + std::string(9000, 'x') + R"("]})",
          "health_check.command must be 1-64 strings");
  refused(R"({"type":"tcp","port":80,"command":["x"]})", "health_check.command must be 1-64");
  refused(R"({"type":"tcp","port":80,"path":"/"})", "health_check.path must be /printable");
  refused(R"({"type":"http","port":80,"path":"/a b"})", "health_check.path must be /printable");
  refused(R"({"type":"tcp","port":80,"retries":3})", "health_check has only known fields");
  // Good ones, on jobs and formations alike.
  EXPECT_EQ(sql.ErrorOf("select pgfleet.submit(array['srv'], health_check => $1::jsonb)",
                        R"({"type":"http","port":8080,"path":"/healthz","interval_seconds":1})"),
            "");
  EXPECT_EQ(sql.ErrorOf("insert into pgfleet.formations (name, kind, replicas, command, "
                        "health_check) values ('web', 'service', 1, array['srv'], $1::jsonb)",
                        R"({"type":"command","command":["cat","/ready"]})"),
            "");
  EXPECT_NE(sql.ErrorOf("update pgfleet.formations set health_check = $1::jsonb",
                        R"({"type":"tcp","port":0})")
                .find("health_check.port"),
            std::string::npos);
  // A replica gets the template's check; the spec hostd is sent carries it.
  sql.Exec(
      "select pgfleet.create_replicas((select id from pgfleet.formations where name = 'web'), 1)");
  EXPECT_EQ(sql.Str("select pgfleet.job_spec(j) -> 'health_check' ->> 'type' from pgfleet.jobs j "
                    "where formation = 'web'"),
            "command");
  // A job's health is hostd's to say, never the submitter's.
  EXPECT_NE(
      sql.ErrorOf("insert into pgfleet.jobs (command, health) values (array['x'], 'healthy')"), "");
}

}  // namespace
}  // namespace pgfleet::integration
