// pgfleet.report_jobs (sql/014_reports.sql) against the real server: host
// reports with fencing, retries with backoff, and attempts lost with their host.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

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

// Collects the payloads of the job channel's notifications on a connection
// (LISTENs when made).
struct JobNotifications : pqxx::notification_receiver {
  explicit JobNotifications(pqxx::connection_base& c)
      : pqxx::notification_receiver(c, "pgfleet_job") {}
  void operator()(const std::string& payload, int) override { got.push_back(payload); }
  // What arrived within `wait` (or already had); forgets it.
  std::vector<std::string> Take(std::chrono::milliseconds wait) {
    if (got.empty()) conn().await_notification(0, static_cast<long>(wait.count()) * 1000);
    conn().get_notifs();
    return std::move(got);
  }
  std::vector<std::string> got;
};

TEST(ReportJobs, OnlyAWatchedJobsChangesAreNotifiedToItsWaiter) {
  TestDatabase db;
  Sql sql(db);
  long long gen = sql.RegisterHost("h1", 1000, 1000);
  long long watched = sql.Submit(100, 10);
  long long other = sql.Submit(100, 10);
  ASSERT_EQ(sql.Assign({watched, other}, "h1").size(), 2u);

  auto waiter = db.Connect();
  JobNotifications notes(*waiter);
  EXPECT_EQ("1", pqxx::nontransaction(*waiter)
                     .exec1("select pgfleet.watch_jobs(array[" + std::to_string(watched) + "])")[0]
                     .as<std::string>());
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.job_waiters"), 1);

  ASSERT_TRUE(sql.ReportOne("h1", gen, Running(other, 1)));
  EXPECT_TRUE(notes.Take(std::chrono::milliseconds(300)).empty());
  ASSERT_TRUE(sql.ReportOne("h1", gen, Running(watched, 1)));
  EXPECT_EQ(std::vector<std::string>{std::to_string(watched)},
            notes.Take(std::chrono::milliseconds(2000)));
  ASSERT_TRUE(sql.ReportOne("h1", gen, Exited(watched, 1, 0)));
  EXPECT_EQ(std::vector<std::string>{std::to_string(watched)},
            notes.Take(std::chrono::milliseconds(2000)));

  pqxx::nontransaction(*waiter).exec("select pgfleet.unwatch_jobs()");
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.job_waiters"), 0);
  // A waiter whose session ended without unwatching is dropped by the next watch.
  {
    auto gone = db.Connect();
    pqxx::nontransaction(*gone).exec("select pgfleet.watch_jobs(array[" + std::to_string(other) +
                                     "])");
  }
  // (A backend leaves pg_stat_activity a moment after its client disconnects.)
  bool dropped = false;
  for (int i = 0; i < 100 && !dropped; ++i) {
    pqxx::nontransaction(*waiter).exec("select pgfleet.watch_jobs(array[" +
                                       std::to_string(watched) + "])");
    dropped = sql.Num("select count(*) from pgfleet.job_waiters where job_id = $1", other) == 0;
    if (!dropped) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(dropped);
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.job_waiters where job_id = $1", watched), 1);
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

TEST(ReportJobs, BatchIsAppliedInOrderAndReportsAfterAnAttemptEndedAreRejected) {
  TestDatabase db;
  Sql sql(db);
  long long gen = sql.RegisterHost("h1", 1000, 1000);
  long long a = sql.Submit(100, 10), b = sql.Submit(200, 20), c = sql.Submit(300, 30);
  long long d = sql.Submit(50, 5, /*max_attempts=*/2);
  ASSERT_EQ(sql.Assign({a, b, c, d}, "h1").size(), 4u);
  json start_failed = {
      {"job", d}, {"attempt", 1}, {"kind", "start_failed"}, {"error", "exec: no such file"}};
  // a: running, running again, exit 0, then a late duplicate exit; b: exit 0
  // only (its running report was lost); c: running, then lost; d: start
  // failed, then a running report that can no longer apply; and a report for
  // another attempt of a.
  json batch = json::array({Running(a, 1, 11), Running(c, 1, 33), Running(a, 1, 11),
                            Exited(b, 1, 0), Exited(a, 1, 0), Lost(c, 1), start_failed,
                            Running(d, 1, 44), Exited(a, 1, 0), Exited(a, 2, 0)});
  auto got = sql.ReportJobs("h1", gen, batch);
  ASSERT_EQ(got.size(), batch.size());
  const std::vector<bool> want = {true, true, true, true, true, true, true, false, false, false};
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("report " + std::to_string(i));
    EXPECT_EQ(got[i].job, batch[i]["job"].get<long long>());
    EXPECT_EQ(got[i].attempt, batch[i]["attempt"].get<int>());
    EXPECT_EQ(got[i].kind, batch[i]["kind"].get<std::string>());
    EXPECT_EQ(got[i].accepted, want[i]);
  }
  EXPECT_EQ(sql.State(a), "succeeded");
  EXPECT_EQ(sql.State(b), "succeeded");
  EXPECT_EQ(sql.State(c), "pending");
  EXPECT_EQ(sql.State(d), "pending");
  EXPECT_EQ(sql.Num("select pid from pgfleet.jobs where id = $1", a), 11);
  EXPECT_EQ(sql.Str("select coalesce(pid::text, 'null') from pgfleet.jobs where id = $1", b),
            "null");
  EXPECT_EQ(sql.Num("select host_losses from pgfleet.jobs where id = $1", c), 1);
  EXPECT_EQ(sql.Num("select failures from pgfleet.jobs where id = $1", d), 1);
  EXPECT_EQ(sql.Str("select error from pgfleet.jobs where id = $1", d), "exec: no such file");
  EXPECT_EQ(sql.Str("select started_at is null from pgfleet.jobs where id = $1", d), "t");
  for (long long job : {a, b, c}) EXPECT_EQ(sql.Events(job, "running"), 1) << job;
  EXPECT_EQ(sql.Events(d, "running"), 0);
  EXPECT_EQ(sql.Events(a, "succeeded"), 1);
  EXPECT_EQ(sql.Events(c, "lost"), 1);
  EXPECT_EQ(sql.Events(d, "requeued"), 1);
  // Events of one attempt are in the order of its reports.
  EXPECT_EQ(sql.Str("select string_agg(kind, ',' order by id) from pgfleet.job_events"
                    " where job_id = $1",
                    b),
            "created,assigned,running,succeeded");
  EXPECT_EQ(sql.Allocated("h1"), "0/0");
  EXPECT_EQ(sql.Drift(), 0);
}

TEST(ReportJobs, AReportNamingAnotherJobsUidIsRejectedEvenInTheSameBatch) {
  TestDatabase db;
  Sql sql(db);
  long long gen = sql.RegisterHost("h1", 1000, 1000);
  long long job = sql.Submit(400, 100);
  ASSERT_EQ(sql.Assign({job}, "h1").size(), 1u);
  const std::string uid = sql.Str("select uid::text from pgfleet.jobs where id = $1", job);
  ASSERT_EQ(36u, uid.size()) << "made at insert";
  // A job of the same id and attempt that this host ran for another (or a
  // restored) database ended as lost; then this job's attempt ran and exited.
  json other = Lost(job, 1);
  other["uid"] = "00000000-0000-4000-8000-000000000000";
  json mine = Exited(job, 1, 0);
  mine["uid"] = uid;
  auto got = sql.ReportJobs("h1", gen, json::array({other, mine}));
  ASSERT_EQ(2u, got.size());
  EXPECT_FALSE(got[0].accepted);
  EXPECT_TRUE(got[1].accepted);
  EXPECT_EQ(sql.State(job), "succeeded");
  EXPECT_EQ(sql.Events(job, "lost"), 0);
  EXPECT_EQ(sql.Events(job, "succeeded"), 1);
  EXPECT_EQ(sql.Num("select host_losses from pgfleet.jobs where id = $1", job), 0);
  EXPECT_EQ(sql.Allocated("h1"), "0/0");
  EXPECT_EQ(sql.Drift(), 0);
  // Alone, it changes nothing either.
  long long next = sql.Submit(100, 10);
  ASSERT_EQ(sql.Assign({next}, "h1").size(), 1u);
  json stray = Exited(next, 1, 1);
  stray["uid"] = "00000000-0000-4000-8000-000000000000";
  EXPECT_FALSE(sql.ReportOne("h1", gen, stray));
  EXPECT_EQ(sql.State(next), "assigned");
  EXPECT_EQ(sql.Allocated("h1"), "100/10");
}

// A batch of running reports alone takes a statement of its own
// (sql/014_reports.sql); among other reports, the general one. Both must come
// to the same thing: two hosts get the same jobs in the same situations, one
// the running reports alone, the other the same reports followed by one that
// applies to nothing (so the batch is not running reports only).
TEST(ReportJobs, RunningReportsAloneEndAsTheSameReportsAmongOthers) {
  TestDatabase db;
  Sql sql(db);
  long long elsewhere = (sql.RegisterHost("h3", 1000, 1000), sql.Submit(10, 1));
  ASSERT_EQ(sql.Assign({elsewhere}, "h3").size(), 1u);
  long long never_assigned = sql.Submit(10, 1);
  struct Outcome {
    std::vector<Report> results;
    std::string rows, events;
  };
  auto run = [&](const std::string& host, bool alone) {
    long long gen = sql.RegisterHost(host, 1000, 1000);
    // a: assigned, reported twice (the first pid counts); b: already running;
    // c: reported with another attempt; d: with another job's uid; e: ended
    // already; and jobs of no attempt here.
    long long a = sql.Submit(10, 1), b = sql.Submit(10, 1), c = sql.Submit(10, 1);
    long long d = sql.Submit(10, 1), e = sql.Submit(10, 1);
    EXPECT_EQ(sql.Assign({a, b, c, d, e}, host).size(), 5u);
    EXPECT_TRUE(sql.ReportOne(host, gen, Running(b, 1, 22)));
    EXPECT_TRUE(sql.ReportOne(host, gen, Exited(e, 1, 0)));
    json other_uid = Running(d, 1, 44);
    other_uid["uid"] = "00000000-0000-4000-8000-000000000000";
    json batch = json::array({Running(a, 1, 11), Running(b, 1, 23), Running(c, 2, 33), other_uid,
                              Running(a, 1, 12), Running(e, 1, 55), Running(elsewhere, 1, 66),
                              Running(never_assigned, 0, 77)});
    json sent = batch;
    if (!alone) sent.push_back(Exited(elsewhere, 1, 0));  // another host's job: refused
    Outcome out;
    out.results = sql.ReportJobs(host, gen, sent);
    EXPECT_EQ(out.results.size(), sent.size());
    out.results.resize(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      EXPECT_EQ(out.results[i].job, batch[i]["job"].get<long long>()) << i;
      EXPECT_EQ(out.results[i].kind, "running") << i;
    }
    // Jobs by their place among the host's, so the two hosts' compare.
    out.rows = sql.Str(
        "select string_agg(state || ':' || coalesce(pid::text, '-') || ':' ||"
        "                  (started_at is not null)::text, ' ' order by id)"
        "  from pgfleet.jobs where id = any($1::bigint[])",
        "{" + std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(c) + "," +
            std::to_string(d) + "," + std::to_string(e) + "}");
    out.events = sql.Str(
        "select string_agg(e.kind || coalesce(' ' || e.detail, ''), ',' order by e.job_id, e.id)"
        "  from pgfleet.job_events e where e.host_id = $1",
        host);
    EXPECT_EQ(sql.State(elsewhere), "assigned");
    EXPECT_EQ(sql.State(never_assigned), "pending");
    return out;
  };
  Outcome alone = run("h1", true), among = run("h2", false);
  const std::vector<bool> want = {true, true, false, false, true, false, false, false};
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("report " + std::to_string(i));
    EXPECT_EQ(alone.results[i].accepted, want[i]);
    EXPECT_EQ(among.results[i].accepted, want[i]);
  }
  EXPECT_EQ(alone.rows,
            "running:11:true running:22:true assigned:-:false assigned:-:false succeeded:-:true");
  EXPECT_EQ(among.rows, alone.rows);
  EXPECT_EQ(alone.events,
            "assigned,running pid 11,assigned,running pid 22,assigned,assigned,"
            "assigned,running pid unknown,succeeded exit code 0");
  EXPECT_EQ(among.events, alone.events);
  EXPECT_EQ(sql.Drift(), 0);
}

}  // namespace
}  // namespace pgfleet::integration
