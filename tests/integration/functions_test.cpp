// The SQL functions of sql/010_functions.sql, called as SQL the way the daemons
// call them, against the real server: submission, placement (never overcommit,
// all-or-nothing per host, also under a concurrent storm), host reports with
// fencing, retries and losses, cancellation, failed dispatches, host status.

#include <gtest/gtest.h>

#include <atomic>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/test_support.h"

namespace pgfleet {
namespace {

using json = nlohmann::json;
using testing::TestDatabase;

struct Assigned {
  long long job = 0;
  int attempt = 0;
  std::string host;
};

struct Report {
  long long job = 0;
  int attempt = 0;
  std::string kind;
  bool accepted = false;
};

// Calls on one connection, each in its own committed transaction.
class Sql {
 public:
  explicit Sql(const TestDatabase& db) : conn_(db.Connect()) {}

  template <typename... Args>
  pqxx::result Exec(const std::string& sql, Args&&... args) {
    pqxx::work tx(*conn_);
    pqxx::result r = tx.exec_params(sql, std::forward<Args>(args)...);
    tx.commit();
    return r;
  }

  // One value as text ("" for null).
  template <typename... Args>
  std::string Str(const std::string& sql, Args&&... args) {
    pqxx::result r = Exec(sql, std::forward<Args>(args)...);
    return r.at(0).at(0).is_null() ? "" : r[0][0].as<std::string>();
  }

  template <typename... Args>
  long long Num(const std::string& sql, Args&&... args) {
    return std::stoll(Str(sql, std::forward<Args>(args)...));
  }

  // The server's error message, or "" when the call succeeded.
  template <typename... Args>
  std::string ErrorOf(const std::string& sql, Args&&... args) {
    try {
      Exec(sql, std::forward<Args>(args)...);
    } catch (const pqxx::sql_error& e) {
      return e.what();
    }
    return "";
  }

  long long RegisterHost(const std::string& id, int cpu, int memory) {
    return Num(
        "select pgfleet.register_host($1, 'http://127.0.0.1:1', $2, $3, '{}', 'process', null)", id,
        cpu, memory);
  }

  long long Submit(int cpu, int memory = 64, int max_attempts = 1,
                   const std::string& formation = "default") {
    return Num(
        "select pgfleet.submit(array['true'], formation => $1, cpu => $2, memory => $3, "
        "max_attempts => $4)",
        formation, cpu, memory, max_attempts);
  }

  std::vector<Assigned> Assign(const std::vector<long long>& jobs, const std::string& host) {
    json plan = json::array();
    for (long long j : jobs) plan.push_back({{"job", j}, {"host", host}});
    std::vector<Assigned> out;
    for (const auto& row :
         Exec("select job_id, attempt, host_id from pgfleet.assign_jobs($1::jsonb)", plan.dump()))
      out.push_back({row[0].as<long long>(), row[1].as<int>(), row[2].as<std::string>()});
    return out;
  }

  std::vector<Report> ReportJobs(const std::string& host, long long generation,
                                 const json& reports) {
    std::vector<Report> out;
    for (const auto& row :
         Exec("select job_id, attempt, kind, accepted from pgfleet.report_jobs($1, $2, $3::jsonb)",
              host, generation, reports.dump()))
      out.push_back(
          {row[0].as<long long>(), row[1].as<int>(), row[2].as<std::string>(), row[3].as<bool>()});
    return out;
  }

  // Accepted flag of a single report.
  bool ReportOne(const std::string& host, long long generation, const json& report) {
    auto r = ReportJobs(host, generation, json::array({report}));
    return r.size() == 1 && r[0].accepted;
  }

  std::string State(long long job) {
    return Str("select state from pgfleet.jobs where id = $1", job);
  }
  long long Events(long long job, const std::string& kind) {
    return Num("select count(*) from pgfleet.job_events where job_id = $1 and kind = $2", job,
               kind);
  }
  std::string Allocated(const std::string& host) {
    return Str("select cpu_allocated || '/' || memory_allocated from pgfleet.hosts where id = $1",
               host);
  }
  long long Drift() { return Num("select count(*) from pgfleet.allocation_drift"); }

 private:
  std::unique_ptr<pqxx::connection> conn_;
};

json Running(long long job, int attempt, int pid = 4242) {
  return {{"job", job}, {"attempt", attempt}, {"kind", "running"}, {"pid", pid}};
}

json Exited(long long job, int attempt, int exit_code) {
  return {{"job", job},
          {"attempt", attempt},
          {"kind", "exited"},
          {"exit_code", exit_code},
          {"signal", nullptr},
          {"oom_killed", false},
          {"peak_memory_bytes", 1024},
          {"cpu_seconds", 0.01},
          {"output_tail", "bye\n"},
          {"error", nullptr}};
}

json Lost(long long job, int attempt) {
  return {
      {"job", job}, {"attempt", attempt}, {"kind", "lost"}, {"error", "host stopped answering"}};
}

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

// --- assign_jobs ------------------------------------------------------------

TEST(AssignJobs, NeverOvercommitsAndIsAllOrNothingPerHost) {
  TestDatabase db;
  Sql sql(db);
  sql.RegisterHost("h1", 1000, 1000);
  long long j1 = sql.Submit(400), j2 = sql.Submit(400), j3 = sql.Submit(400);

  EXPECT_TRUE(sql.Assign({j1, j2, j3}, "h1").empty());
  EXPECT_EQ(sql.Allocated("h1"), "0/0");
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.jobs where state = 'pending'"), 3);
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.job_events where kind = 'assigned'"), 0);

  auto assigned = sql.Assign({j1, j2}, "h1");
  ASSERT_EQ(assigned.size(), 2u);
  for (const auto& a : assigned) {
    EXPECT_EQ(a.attempt, 1);
    EXPECT_EQ(a.host, "h1");
    EXPECT_EQ(sql.State(a.job), "assigned");
    EXPECT_EQ(sql.Events(a.job, "assigned"), 1);
  }
  EXPECT_EQ(sql.Allocated("h1"), "800/128");
  EXPECT_EQ(sql.State(j3), "pending");

  // The third no longer fits; a job already assigned is not assigned again.
  EXPECT_TRUE(sql.Assign({j3}, "h1").empty());
  EXPECT_TRUE(sql.Assign({j1}, "h1").empty());
  EXPECT_EQ(sql.Allocated("h1"), "800/128");
  EXPECT_EQ(sql.Num("select attempt from pgfleet.jobs where id = $1", j1), 1);
  EXPECT_EQ(sql.Drift(), 0);
}

TEST(AssignJobs, JobListedTwiceInPlanIsReservedOnce) {
  TestDatabase db;
  Sql sql(db);
  sql.RegisterHost("h1", 1000, 1000);
  sql.RegisterHost("h2", 1000, 1000);
  long long j1 = sql.Submit(300), j2 = sql.Submit(300);
  EXPECT_EQ(sql.Assign({j1, j1}, "h1").size(), 1u);
  json plan = json::array({{{"job", j2}, {"host", "h1"}}, {{"job", j2}, {"host", "h2"}}});
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.assign_jobs($1::jsonb)", plan.dump()), 1);
  EXPECT_EQ(sql.Str("select host_id from pgfleet.jobs where id = $1", j2), "h1");
  EXPECT_EQ(sql.Allocated("h1"), "600/128");
  EXPECT_EQ(sql.Allocated("h2"), "0/0");
  EXPECT_EQ(sql.Drift(), 0);
}

TEST(AssignJobs, SkipsHostsThatAreNotUpOrSuspended) {
  TestDatabase db;
  Sql sql(db);
  sql.RegisterHost("h1", 1000, 1000);
  long long j = sql.Submit(100);
  sql.Exec("select pgfleet.drain('h1')");
  EXPECT_TRUE(sql.Assign({j}, "h1").empty());
  sql.Exec("select pgfleet.set_host_state('h1', 'up')");
  sql.Exec("update pgfleet.hosts set suspended_until = now() + interval '1 hour' where id = 'h1'");
  EXPECT_TRUE(sql.Assign({j}, "h1").empty());
  sql.Exec("update pgfleet.hosts set suspended_until = null where id = 'h1'");
  EXPECT_EQ(sql.Assign({j}, "h1").size(), 1u);
  EXPECT_EQ(sql.Drift(), 0);
}

TEST(AssignJobs, ConcurrentStormNeverOvercommitsHost) {
  TestDatabase db;
  Sql(db).RegisterHost("h1", 1000, 100000);
  long long generation = Sql(db).Num("select generation from pgfleet.hosts where id = 'h1'");
  constexpr int kThreads = 8;
  constexpr int kRounds = 50;
  std::atomic<int> assigned{0};
  std::atomic<int> finished{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        Sql sql(db);
        long long held = 0;  // the job this thread holds on h1, if any
        for (int r = 0; r < kRounds; ++r) {
          // Release the job held since last round, so the 8 threads keep
          // contending for the host's 3 slots; the last round's jobs stay held.
          if (held != 0) {
            bool ok = sql.ReportOne("h1", generation, Running(held, 1)) &&
                      sql.ReportOne("h1", generation, Exited(held, 1, 0));
            if (ok) ++finished;
            held = 0;
          }
          std::string formation = "storm-" + std::to_string(t) + "-" + std::to_string(r);
          long long job = sql.Submit(300, 10, 1, formation);
          if (sql.Assign({job}, "h1").empty()) continue;
          ++assigned;
          held = job;
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;

  RecordProperty("assigned", assigned.load());
  RecordProperty("finished", finished.load());
  Sql sql(db);
  long long live = sql.Num(
      "select count(*) from pgfleet.jobs "
      " where host_id = 'h1' and state in ('assigned', 'running')");
  long long cpu_allocated = sql.Num("select cpu_allocated from pgfleet.hosts where id = 'h1'");
  EXPECT_LE(cpu_allocated, 1000);
  EXPECT_EQ(cpu_allocated, 300 * live);
  EXPECT_EQ(sql.Num("select memory_allocated from pgfleet.hosts where id = 'h1'"), 10 * live);
  EXPECT_EQ(sql.Drift(), 0);
  EXPECT_GT(assigned.load(), 3);  // capacity was released and reused
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.job_events where kind = 'assigned'"),
            assigned.load());
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.jobs where state = 'succeeded'"),
            finished.load());
  EXPECT_EQ(live + finished.load(), assigned.load());
}

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

// --- hosts ------------------------------------------------------------------

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

// --- retry_backoff ----------------------------------------------------------

TEST(RetryBackoff, DoublesFromOneSecondUpToFiveMinutes) {
  TestDatabase db;
  Sql sql(db);
  auto seconds = [&](int failures) {
    return sql.Num("select extract(epoch from pgfleet.retry_backoff($1))::bigint", failures);
  };
  EXPECT_EQ(seconds(1), 1);
  EXPECT_EQ(seconds(2), 2);
  EXPECT_EQ(seconds(3), 4);
  EXPECT_EQ(seconds(9), 256);
  EXPECT_EQ(seconds(10), 300);
  EXPECT_EQ(seconds(1000), 300);
}

}  // namespace
}  // namespace pgfleet
