// The SQL functions of sql/ not covered by their own test files, called as SQL
// the way the daemons call them, against the real server: submission,
// cancellation, failed dispatches, host status, retry backoff.

#include <gtest/gtest.h>

#include <string>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

// --- submit -----------------------------------------------------------------

TEST(Submit, SameIdempotencyKeyReturnsSameJob) {
  TestDatabase db;
  Sql sql(db);
  long long a = sql.Num("select pgfleet.submit(array['echo', 'hi'], idempotency_key => 'k1')");
  long long b = sql.Num("select pgfleet.submit(array['echo', 'hi'], idempotency_key => 'k1')");
  EXPECT_EQ(a, b);
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.jobs"), 1);
  EXPECT_EQ(sql.Events(a, "created"), 1);
  long long c = sql.Num("select pgfleet.submit(array['echo', 'hi'], idempotency_key => 'k2')");
  EXPECT_NE(c, a);
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.jobs"), 2);
}

TEST(Submit, OmittedOrNullOptionsTakeTheColumnDefaults) {
  TestDatabase db;
  Sql sql(db);
  long long plain = sql.Num("select pgfleet.submit(array['true'])");
  long long nulls = sql.Num(
      "select pgfleet.submit(array['true'], null, null, null, null, null, null, null, null, null, "
      "null, null, null, null, null)");
  long long inserted =
      sql.Num("insert into pgfleet.jobs (command) values (array['true']) returning id");
  const std::string spec = "select pgfleet.job_spec(j)::text from pgfleet.jobs j where j.id = $1";
  EXPECT_EQ(sql.Str(spec, plain), sql.Str(spec, inserted));
  EXPECT_EQ(sql.Str(spec, nulls), sql.Str(spec, inserted));
}

TEST(Submit, GivenOptionsAreWritten) {
  TestDatabase db;
  Sql sql(db);
  // Positionally, as the CLI calls it.
  long long job = sql.Num(
      "select pgfleet.submit(array['sleep', '1'], 'f1', 250, 128, '{\"A\":\"1\"}', "
      "'{\"zone\":\"a\"}', 70, 3, 'key-1', '/srv/rootfs', 'nobody', 'none', 77, true, 4)");
  EXPECT_EQ(
      sql.Str("select concat_ws(' ', formation, cpu, memory, env, constraints, priority, "
              "max_attempts, idempotency_key, rootfs, run_as, network, pids_max, "
              "cpu_hard_limit, stop_grace_seconds) from pgfleet.jobs where id = $1",
              job),
      "f1 250 128 {\"A\": \"1\"} {\"zone\": \"a\"} 70 3 key-1 /srv/rootfs nobody none 77 t 4");
  std::string err = sql.ErrorOf("select pgfleet.submit(array['true'], cpu => 0)");
  EXPECT_NE(err.find("cpu must be > 0"), std::string::npos) << err;
}

// --- cancel -----------------------------------------------------------------

TEST(Cancel, PendingJobIsCancelledAtOnce) {
  TestDatabase db;
  Sql sql(db);
  long long job = sql.Submit(100);
  EXPECT_EQ(sql.Str("select pgfleet.cancel($1)", job), "cancelled");
  EXPECT_EQ(sql.State(job), "cancelled");
  EXPECT_EQ(sql.Events(job, "cancelled"), 1);
  EXPECT_EQ(sql.Str("select finished_at is not null from pgfleet.jobs where id = $1", job), "t");
  // Cancelling again changes nothing.
  EXPECT_EQ(sql.Str("select pgfleet.cancel($1)", job), "cancelled");
  EXPECT_EQ(sql.Events(job, "cancelled"), 1);
  // A cancelled job is never placed.
  sql.RegisterHost("h1", 1000, 1000);
  EXPECT_TRUE(sql.Assign({job}, "h1").empty());
}

TEST(Cancel, RunningJobIsStoppedThenCancelledOnExit) {
  TestDatabase db;
  Sql sql(db);
  long long gen = sql.RegisterHost("h1", 1000, 1000);
  long long job = sql.Submit(400, 100, /*max_attempts=*/3);
  ASSERT_EQ(sql.Assign({job}, "h1").size(), 1u);
  ASSERT_TRUE(sql.ReportOne("h1", gen, Running(job, 1)));

  EXPECT_EQ(sql.Str("select pgfleet.cancel($1)", job), "stopping");
  EXPECT_EQ(sql.State(job), "running");
  EXPECT_EQ(sql.Str("select desired_state from pgfleet.jobs where id = $1", job), "stop");
  EXPECT_EQ(sql.Events(job, "stop_requested"), 1);
  EXPECT_EQ(sql.Str("select pgfleet.cancel($1)", job), "stopping");
  EXPECT_EQ(sql.Events(job, "stop_requested"), 1);

  // Killed by the stop: cancelled, not retried although attempts remain.
  json killed = Exited(job, 1, 0);
  killed["exit_code"] = nullptr;
  killed["signal"] = 15;
  ASSERT_TRUE(sql.ReportOne("h1", gen, killed));
  EXPECT_EQ(sql.State(job), "cancelled");
  EXPECT_EQ(sql.Events(job, "cancelled"), 1);
  EXPECT_EQ(sql.Str("select finished_at is not null from pgfleet.jobs where id = $1", job), "t");
  EXPECT_EQ(sql.Allocated("h1"), "0/0");
  EXPECT_EQ(sql.Drift(), 0);
}

TEST(Cancel, MissingJobRaisesErrorNamingTheJob) {
  TestDatabase db;
  Sql sql(db);
  std::string err = sql.ErrorOf("select pgfleet.cancel(987654)");
  EXPECT_NE(err.find("job 987654 does not exist"), std::string::npos) << err;
}

// --- dispatch_failed --------------------------------------------------------

// --- hosts.config_version -------------------------------------------------

// Schedulers keep a host's labels, API URL, driver and ticket key between
// passes and read them again only when config_version moves: it must move on
// every change of them, whoever writes it, and not on the hot path's writes.
TEST(HostConfigVersion, MovesWhenWhatSchedulersKeepChangesAndOnlyThen) {
  TestDatabase db;
  Sql sql(db);
  const std::string version = "select config_version from pgfleet.hosts where id = 'h1'";
  sql.RegisterHost("h1", 1000, 1000);
  long long v = sql.Num(version);
  sql.Num("select 1 from pgfleet.set_host_key('h1', repeat('ab', 32))");
  EXPECT_EQ(sql.Num(version), ++v) << "a first key";
  sql.Num("select 1 from pgfleet.set_host_key('h1', repeat('ab', 32))");
  EXPECT_EQ(sql.Num(version), v) << "the same key again";
  sql.Num("select 1 from pgfleet.set_host_key('h1', repeat('cd', 32))");
  EXPECT_EQ(sql.Num(version), ++v) << "a new key";
  // Each statement, then whether the version moved by one (true) or stayed.
  const std::pair<std::string, bool> steps[] = {
      {"update pgfleet.hosts set cpu_allocated = 10, memory_allocated = 10, suspensions = 1",
       false},
      {"update pgfleet.hosts set labels = '{\"zone\": \"b\"}'", true},
      {"update pgfleet.hosts set api_url = 'http://127.0.0.1:2'", true},
      {"update pgfleet.hosts set driver = 'container'", true},
      {"delete from pgfleet.host_keys", true},
  };
  for (const auto& [statement, moves] : steps) {
    sql.Exec(statement);
    if (moves) ++v;
    EXPECT_EQ(sql.Num(version), v) << statement;
  }
}

TEST(DispatchFailed, ReturnsJobsToPendingFreesHostAndSuspendsIt) {
  TestDatabase db;
  Sql sql(db);
  sql.RegisterHost("h1", 1000, 1000);
  long long j1 = sql.Submit(300, 100), j2 = sql.Submit(200, 50);
  ASSERT_EQ(sql.Assign({j1, j2}, "h1").size(), 2u);
  EXPECT_EQ(sql.Allocated("h1"), "500/150");

  json jobs = json::array({{{"job", j1}, {"attempt", 1}}, {{"job", j2}, {"attempt", 1}}});
  EXPECT_EQ(
      sql.Num("select pgfleet.dispatch_failed('h1', $1::jsonb, 'connection refused')", jobs.dump()),
      2);
  EXPECT_EQ(sql.State(j1), "pending");
  EXPECT_EQ(sql.State(j2), "pending");
  EXPECT_NE(sql.Str("select error from pgfleet.jobs where id = $1", j1).find("connection refused"),
            std::string::npos);
  EXPECT_EQ(sql.Events(j1, "requeued"), 1);
  EXPECT_EQ(sql.Allocated("h1"), "0/0");
  EXPECT_EQ(sql.Str("select suspended_until > now() from pgfleet.hosts where id = 'h1'"), "t");
  EXPECT_EQ(sql.Num("select suspensions from pgfleet.hosts where id = 'h1'"), 1);
  EXPECT_EQ(sql.Str("select suspended::text from pgfleet.host_status where id = 'h1'"), "true");
  EXPECT_EQ(sql.Drift(), 0);
  // While suspended the host takes nothing.
  EXPECT_TRUE(sql.Assign({j1}, "h1").empty());
}

TEST(DispatchFailed, SuspensionBackoffStaysAtItsCapForAnyCount) {
  TestDatabase db;
  Sql sql(db);
  sql.RegisterHost("h1", 1000, 1000);
  long long job = sql.Submit(100);
  ASSERT_EQ(sql.Assign({job}, "h1").size(), 1u);
  sql.Exec("update pgfleet.hosts set suspensions = 1100 where id = 'h1'");
  json jobs = json::array({{{"job", job}, {"attempt", 1}}});
  EXPECT_EQ(sql.Num("select pgfleet.dispatch_failed('h1', $1::jsonb, 'refused')", jobs.dump()), 1);
  EXPECT_EQ(sql.Str("select suspended_until between now() + interval '59 s' and now() + "
                    "interval '60 s' from pgfleet.hosts where id = 'h1'"),
            "t");
}

// --- hosts ------------------------------------------------------------------

// Live usage rides on a heartbeat: a reading replaces the host's previous
// one; what is not a reading is skipped, never failing the heartbeat; only
// the running attempt's reading is shown.
TEST(HostUsage, AHeartbeatReplacesTheHostsReadingsAndSkipsMalformedOnes) {
  TestDatabase db;
  Sql sql(db);
  sql.RegisterHost("h1", 4000, 4000);
  long long a = sql.Submit(1000), b = sql.Submit(1000);
  sql.Assign({a, b}, "h1");
  sql.ReportJobs("h1", 1,
                 json::array({{{"job", a}, {"attempt", 1}, {"kind", "running"}, {"pid", 10}},
                              {{"job", b}, {"attempt", 1}, {"kind", "running"}, {"pid", 11}}}));
  auto beat = [&](const json& usage) {
    return sql.Str("select state from pgfleet.heartbeat('h1', 1, 2, null, $1::jsonb)",
                   usage.dump());
  };
  const json malformed =
      json::array({{{"job", a}, {"attempt", 1}, {"cpu_cores", 1.5}, {"memory_bytes", 1048576}},
                   {{"job", b}, {"attempt", 1}, {"cpu_cores", "lots"}, {"memory_bytes", 1}},
                   {{"job", -1}, {"attempt", 1}, {"cpu_cores", 1}, {"memory_bytes", 1}},
                   {{"job", b}, {"attempt", 1}, {"cpu_cores", -2}, {"memory_bytes", 1}},
                   {{"job", b}, {"attempt", 1}, {"cpu_cores", 1}, {"memory_bytes", "1e99"}},
                   "not an object",
                   42});
  EXPECT_EQ("up", beat(malformed));
  EXPECT_EQ("1.5 1048576",
            sql.Str("select cpu_used || ' ' || memory_used_bytes from pgfleet.visible_jobs "
                    "where id = $1",
                    a));
  EXPECT_EQ("", sql.Str("select cpu_used from pgfleet.visible_jobs where id = $1", b));
  EXPECT_EQ("1.50 1048576 2000 128",
            sql.Str("select cpu_used || ' ' || memory_used_bytes || ' ' || cpu_allocated || ' ' || "
                    "memory_allocated from pgfleet.host_status where id = 'h1'"));
  // Not an array at all: nothing recorded, the heartbeat still counts.
  EXPECT_EQ("up", beat(json::object({{"job", a}})));
  EXPECT_EQ(0, sql.Num("select count(*) from pgfleet.job_usage"));
  // The next reading replaces the previous one; one without usage keeps it.
  EXPECT_EQ(
      "up",
      beat(json::array({{{"job", b}, {"attempt", 1}, {"cpu_cores", 0.25}, {"memory_bytes", 7}}})));
  EXPECT_EQ("up", sql.Str("select state from pgfleet.heartbeat('h1', 1, 2)"));
  EXPECT_EQ(std::to_string(b) + ":0.25",
            sql.Str("select string_agg(job_id || ':' || cpu_cores, ',') from pgfleet.job_usage"));
  // A reading of an attempt that is not the job's running one is not shown.
  sql.ReportJobs("h1", 1,
                 json::array({{{"job", b}, {"attempt", 1}, {"kind", "exited"}, {"exit_code", 0}}}));
  EXPECT_EQ("", sql.Str("select cpu_used from pgfleet.visible_jobs where id = $1", b));
  EXPECT_EQ("", sql.Str("select cpu_used from pgfleet.host_status where id = 'h1'"));
  // An older generation's heartbeat records nothing; registering again clears the host's readings.
  EXPECT_EQ("up", sql.Str("select state from pgfleet.heartbeat('h1', 0, 2, null, $1::jsonb)",
                          malformed.dump()));
  EXPECT_EQ(1, sql.Num("select count(*) from pgfleet.job_usage"));
  sql.RegisterHost("h1", 4000, 4000);
  EXPECT_EQ(0, sql.Num("select count(*) from pgfleet.job_usage"));
}

TEST(HostStatus, HostIsAliveRightAfterRegistering) {
  TestDatabase db;
  Sql sql(db);
  EXPECT_EQ(sql.RegisterHost("h1", 1000, 2000), 1);
  EXPECT_EQ(sql.Str("select alive::text from pgfleet.host_status where id = 'h1'"), "true");
  EXPECT_EQ(sql.Str("select (heartbeat_age_s < 5)::text from pgfleet.host_status where id = 'h1'"),
            "true");
  EXPECT_EQ(
      sql.Str("select state || ' ' || cpu_free || ' ' || memory_free from pgfleet.host_status "
              "where id = 'h1'"),
      "up 1000 2000");
  // Registering again bumps the generation.
  EXPECT_EQ(sql.RegisterHost("h1", 1000, 2000), 2);
}

TEST(SetHostState, BogusStateIsRejectedNamingTheRule) {
  TestDatabase db;
  Sql sql(db);
  sql.RegisterHost("h1", 1000, 1000);
  std::string err = sql.ErrorOf("select pgfleet.set_host_state('h1', 'bogus')");
  EXPECT_NE(err.find("host state must be up, draining or offline (got bogus)"), std::string::npos)
      << err;
  EXPECT_EQ(sql.Str("select state from pgfleet.hosts where id = 'h1'"), "up");
  err = sql.ErrorOf("select pgfleet.set_host_state('nope', 'offline')");
  EXPECT_NE(err.find("host nope does not exist"), std::string::npos) << err;
  EXPECT_EQ(sql.ErrorOf("select pgfleet.set_host_state('h1', 'offline')"), "");
  EXPECT_EQ(sql.Str("select state from pgfleet.hosts where id = 'h1'"), "offline");
}

// --- next_retry_in ----------------------------------------------------------

TEST(NextRetryIn, SecondsUntilTheEarliestBackoffEndsAndNullWhenNoneWaits) {
  TestDatabase db;
  Sql sql(db);
  EXPECT_EQ(sql.Str("select pgfleet.next_retry_in()"), "");
  long long soon = sql.Submit(100, 64);
  long long later = sql.Submit(100, 64);
  sql.Exec("update pgfleet.jobs set not_before = now() + interval '30 s' where id = $1", soon);
  sql.Exec("update pgfleet.jobs set not_before = now() + interval '90 s' where id = $1", later);
  long long seconds = sql.Num("select round(pgfleet.next_retry_in())::bigint");
  EXPECT_GE(seconds, 28);
  EXPECT_LE(seconds, 30);
  // A backoff that already ended is not waited for.
  sql.Exec("update pgfleet.jobs set not_before = now() - interval '1 s' where id = $1", soon);
  EXPECT_GE(sql.Num("select round(pgfleet.next_retry_in())::bigint"), 88);
}

// A scheduler asks before each sleep; during a burst on top of a long history
// (statistics that see no pending job) it must not read every pending job.
TEST(NextRetryIn, ReadsTheRetryIndexNotEveryPendingJob) {
  TestDatabase db;
  Sql sql(db);
  // Finished history, written as history (no insert checks, no events).
  sql.Exec(
      "do $$ begin set local session_replication_role = replica; "
      "insert into pgfleet.jobs (command, state, attempt, host_id, finished_at, exit_code) "
      "select '{true}', 'succeeded', 1, 'h1', now(), 0 from generate_series(1, 20000); end $$");
  sql.Exec("analyze pgfleet.jobs");
  sql.Exec("insert into pgfleet.jobs (command) select '{true}' from generate_series(1, 5000)");
  long long job = sql.Submit(100, 64);
  sql.Exec("update pgfleet.jobs set not_before = now() + interval '60 s' where id = $1", job);
  // The scans of this transaction, counted after the call (a CTE runs first).
  pqxx::result r = sql.Exec(
      "with c as materialized (select pgfleet.next_retry_in() as s) "
      "select c.s > 0, pg_stat_get_xact_numscans('pgfleet.jobs_ready_idx'::regclass), "
      "pg_stat_get_xact_numscans('pgfleet.jobs'::regclass), "
      "pg_stat_get_xact_numscans('pgfleet.jobs_retry_at_idx'::regclass) from c");
  EXPECT_EQ(r[0][0].as<std::string>(), "t");
  EXPECT_EQ(r[0][1].as<long long>(), 0) << "next_retry_in scanned the pending jobs' index";
  EXPECT_EQ(r[0][2].as<long long>(), 0) << "next_retry_in scanned the whole table";
  EXPECT_EQ(r[0][3].as<long long>(), 1);
}

// --- retry_backoff ----------------------------------------------------------

long long BackoffSeconds(Sql& sql, int failures) {
  return sql.Num("select extract(epoch from pgfleet.retry_backoff($1))::bigint", failures);
}

TEST(RetryBackoff, DoublesFromOneSecondUpToFiveMinutes) {
  TestDatabase db;
  Sql sql(db);
  auto seconds = [&](int failures) { return BackoffSeconds(sql, failures); };
  EXPECT_EQ(seconds(1), 1);
  EXPECT_EQ(seconds(2), 2);
  EXPECT_EQ(seconds(3), 4);
  EXPECT_EQ(seconds(9), 256);
  EXPECT_EQ(seconds(10), 300);
  EXPECT_EQ(seconds(1000), 300);
}

TEST(RetryBackoff, AnyFailureCountGivesAtMostTheCapWithoutOverflow) {
  TestDatabase db;
  Sql sql(db);
  auto seconds = [&](int failures) { return BackoffSeconds(sql, failures); };
  EXPECT_EQ(seconds(0), 1);
  EXPECT_EQ(seconds(1023), 300);
  EXPECT_EQ(seconds(1100), 300);  // 2^1099 is past the range of double precision
  EXPECT_EQ(seconds(2147483647), 300);
  // A job whose failures count is that high is requeued, not stuck on an error.
  long long gen = sql.RegisterHost("h1", 1000, 1000);
  long long job = sql.Submit(100, 64, /*max_attempts=*/2000);
  sql.Exec("update pgfleet.jobs set failures = 1100 where id = $1", job);
  ASSERT_EQ(sql.Assign({job}, "h1").size(), 1u);
  ASSERT_TRUE(sql.ReportOne("h1", gen, Exited(job, 1, 1)));
  EXPECT_EQ(sql.State(job), "pending");
  EXPECT_EQ(
      sql.Str("select not_before <= now() + interval '300 s' from pgfleet.jobs where id = $1", job),
      "t");
}

}  // namespace
}  // namespace pgfleet::integration
