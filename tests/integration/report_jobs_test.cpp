// pgfleet.report_jobs (sql/014_reports.sql) against the real server: host
// reports with fencing, retries with backoff, and attempts lost with their host.

#include <gtest/gtest.h>

#include <string>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

// --- report_jobs ------------------------------------------------------------

TEST(ReportJobs, RunningThenExitZeroSucceedsAndFreesResources) {
  TestDatabase db;
  Sql sql(db);
  long long gen = sql.RegisterHost("h1", 1000, 1000);
  long long job = sql.Submit(400, 100);
  ASSERT_EQ(sql.Assign({job}, "h1").size(), 1u);
  EXPECT_EQ(sql.Allocated("h1"), "400/100");

  EXPECT_TRUE(sql.ReportOne("h1", gen, Running(job, 1, 77)));
  EXPECT_EQ(sql.State(job), "running");
  EXPECT_EQ(sql.Num("select pid from pgfleet.jobs where id = $1", job), 77);
  // A repeated running report (host retrying) writes no second event.
  sql.ReportOne("h1", gen, Running(job, 1, 77));
  EXPECT_TRUE(sql.ReportOne("h1", gen, Exited(job, 1, 0)));

  EXPECT_EQ(sql.State(job), "succeeded");
  EXPECT_EQ(sql.Events(job, "running"), 1);
  EXPECT_EQ(sql.Events(job, "succeeded"), 1);
  EXPECT_EQ(
      sql.Str("select exit_code::text || coalesce(error, '') from pgfleet.jobs where id = $1", job),
      "0");
  EXPECT_EQ(sql.Str("select output_tail from pgfleet.jobs where id = $1", job), "bye\n");
  EXPECT_EQ(sql.Str("select finished_at is not null from pgfleet.jobs where id = $1", job), "t");
  EXPECT_EQ(sql.Allocated("h1"), "0/0");
  EXPECT_EQ(sql.Drift(), 0);
}

TEST(ReportJobs, StaleReportIsRejectedAndChangesNothing) {
  TestDatabase db;
  Sql sql(db);
  long long gen = sql.RegisterHost("h1", 1000, 1000);
  sql.RegisterHost("h2", 1000, 1000);
  long long gen2 = sql.Num("select generation from pgfleet.hosts where id = 'h2'");
  long long job = sql.Submit(400, 100);
  ASSERT_EQ(sql.Assign({job}, "h1").size(), 1u);
  ASSERT_TRUE(sql.ReportOne("h1", gen, Running(job, 1)));
  long long events = sql.Num("select count(*) from pgfleet.job_events");

  auto wrong_attempt = sql.ReportJobs("h1", gen, json::array({Exited(job, 2, 0)}));
  ASSERT_EQ(wrong_attempt.size(), 1u);
  EXPECT_FALSE(wrong_attempt[0].accepted);
  EXPECT_EQ(wrong_attempt[0].job, job);
  EXPECT_EQ(wrong_attempt[0].attempt, 2);
  EXPECT_FALSE(sql.ReportOne("h2", gen2, Exited(job, 1, 0)));        // wrong host
  EXPECT_FALSE(sql.ReportOne("h1", gen + 1, Exited(job, 1, 0)));     // wrong generation
  EXPECT_FALSE(sql.ReportOne("h1", gen, Exited(job + 1000, 1, 0)));  // no such job

  EXPECT_EQ(sql.State(job), "running");
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.job_events"), events);
  EXPECT_EQ(sql.Allocated("h1"), "400/100");
  EXPECT_EQ(sql.Allocated("h2"), "0/0");
  EXPECT_EQ(sql.Drift(), 0);
}

TEST(ReportJobs, FailedAttemptIsRequeuedWithBackoffUntilAttemptsRunOut) {
  TestDatabase db;
  Sql sql(db);
  long long gen = sql.RegisterHost("h1", 1000, 1000);
  long long job = sql.Submit(400, 100, /*max_attempts=*/2);
  ASSERT_EQ(sql.Assign({job}, "h1").size(), 1u);
  ASSERT_TRUE(sql.ReportOne("h1", gen, Running(job, 1)));
  ASSERT_TRUE(sql.ReportOne("h1", gen, Exited(job, 1, 3)));

  EXPECT_EQ(sql.State(job), "pending");
  EXPECT_EQ(sql.Num("select failures from pgfleet.jobs where id = $1", job), 1);
  EXPECT_EQ(sql.Str("select not_before > now() from pgfleet.jobs where id = $1", job), "t");
  EXPECT_EQ(sql.Str("select finished_at is null from pgfleet.jobs where id = $1", job), "t");
  EXPECT_EQ(sql.Events(job, "requeued"), 1);
  EXPECT_EQ(sql.Allocated("h1"), "0/0");

  auto again = sql.Assign({job}, "h1");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempt, 2);
  // The first attempt's host can no longer report for the job.
  EXPECT_FALSE(sql.ReportOne("h1", gen, Exited(job, 1, 0)));
  ASSERT_TRUE(sql.ReportOne("h1", gen, Running(job, 2)));
  ASSERT_TRUE(sql.ReportOne("h1", gen, Exited(job, 2, 3)));

  EXPECT_EQ(sql.State(job), "failed");
  EXPECT_EQ(sql.Str("select error from pgfleet.jobs where id = $1", job), "exit code 3");
  EXPECT_EQ(sql.Num("select failures from pgfleet.jobs where id = $1", job), 2);
  EXPECT_EQ(sql.Num("select exit_code from pgfleet.jobs where id = $1", job), 3);
  EXPECT_EQ(sql.Str("select finished_at is not null from pgfleet.jobs where id = $1", job), "t");
  EXPECT_EQ(sql.Events(job, "failed"), 1);
  EXPECT_EQ(sql.Allocated("h1"), "0/0");
  EXPECT_EQ(sql.Drift(), 0);
}

TEST(ReportJobs, ExitOfAssignedJobAlsoRecordsRunning) {
  TestDatabase db;
  Sql sql(db);
  long long gen = sql.RegisterHost("h1", 1000, 1000);
  long long job = sql.Submit(400, 100);
  ASSERT_EQ(sql.Assign({job}, "h1").size(), 1u);
  // The running report was lost; only the exit arrives.
  ASSERT_TRUE(sql.ReportOne("h1", gen, Exited(job, 1, 0)));
  EXPECT_EQ(sql.State(job), "succeeded");
  EXPECT_EQ(sql.Events(job, "running"), 1);
  EXPECT_EQ(sql.Events(job, "succeeded"), 1);
  EXPECT_EQ(sql.Str("select started_at is not null from pgfleet.jobs where id = $1", job), "t");
  EXPECT_EQ(sql.Allocated("h1"), "0/0");
  EXPECT_EQ(sql.Drift(), 0);
}

TEST(ReportJobs, LostAttemptRequeuesWithoutCountingFailuresAndThreeLossesFail) {
  TestDatabase db;
  Sql sql(db);
  long long gen = sql.RegisterHost("h1", 1000, 1000);
  long long job = sql.Submit(400, 100, /*max_attempts=*/1);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    auto a = sql.Assign({job}, "h1");
    ASSERT_EQ(a.size(), 1u);
    ASSERT_EQ(a[0].attempt, attempt);
    if (attempt == 2) {
      ASSERT_TRUE(sql.ReportOne("h1", gen, Running(job, attempt)));
    }
    ASSERT_TRUE(sql.ReportOne("h1", gen, Lost(job, attempt)));
    EXPECT_EQ(sql.State(job), attempt < 3 ? "pending" : "failed");
    EXPECT_EQ(sql.Num("select host_losses from pgfleet.jobs where id = $1", job), attempt);
    EXPECT_EQ(sql.Num("select failures from pgfleet.jobs where id = $1", job), 0);
    EXPECT_EQ(sql.Events(job, "lost"), attempt);
    EXPECT_EQ(sql.Allocated("h1"), "0/0");
  }
  EXPECT_EQ(sql.Str("select finished_at is not null from pgfleet.jobs where id = $1", job), "t");
  EXPECT_NE(sql.Str("select error from pgfleet.jobs where id = $1", job).find("lost"),
            std::string::npos);
  EXPECT_EQ(sql.Drift(), 0);
}

}  // namespace
}  // namespace pgfleet::integration
