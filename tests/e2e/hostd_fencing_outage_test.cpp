// hostd through database outages, with real processes: a host cut off from
// the database for longer than --host-ttl stops its jobs by itself, and
// re-registers and reports once the database is back; a PostgreSQL restart
// mid-run keeps jobs running, their reports wait in hostd and all arrive
// after the reconnect. These tests stop and start a PostgreSQL of their own
// (PrivatePostgres), never the shared one, so they run beside other tests.

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hostd_fencing_fixture.h"

namespace pgfleet::testing::fencing {
namespace {

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST_F(HostdFencingTest, HostCutOffFromTheDatabaseStopsItsJobsAfterTheTtlAndReportsWhenBack) {
  pg_ = std::make_unique<PrivatePostgres>();
  db_ = std::make_unique<TestDatabase>(pg_->admin_dsn(), true);
  cluster_ = std::make_unique<Cluster>(*db_);
  // No scheduler: nothing else may act on the job; the assignment is written
  // by hand and hostd's reconcile starts it.
  Process& host = cluster_->StartHost("h1", 4000, 4000, {"--host-ttl", "2"});
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  std::string id = db_->Scalar("select pgfleet.submit(array['sh', '-c', '" +
                               std::string(kJobWithChild) + "'], 'manual')");
  db_->Scalar("select count(*) from pgfleet.assign_jobs('[{\"job\": " + id +
              ", \"host\": \"h1\"}]')");
  JobProcs procs = Running(id, "h1", 1);
  ASSERT_FALSE(HasFailure());
  long long gen = Generation("h1");

  auto cut = Clock::now();
  pg_->Stop();
  // Not fenced early (unless stopping PostgreSQL itself took most of the fence
  // time, as on an overloaded machine).
  if (Clock::now() - cut < 1s) {
    EXPECT_TRUE(procs.AnyAlive());
  }
  // Fenced by hostd itself: SIGKILL to the whole job once no heartbeat has
  // succeeded for the TTL less its margin (2 s - 0.5 s), not before.
  ASSERT_TRUE(WaitFor([&] { return !procs.AnyAlive(); }, 6s)) << host.Log();
  double after = std::chrono::duration<double>(Clock::now() - cut).count();
  EXPECT_GT(after, 0.8);
  EXPECT_LT(after, 3.0);
  std::this_thread::sleep_for(1500ms);  // the database stays away past the TTL
  pg_->Start();

  // Back: a new generation, then the buffered report. The fence killed the
  // attempt, not the job's own failure: it was lost with its host, and the job
  // waits for a new attempt (the host-loss rule), its attempts unspent.
  ASSERT_TRUE(WaitFor([&] { return Generation("h1") > gen; }, 20s)) << host.Log();
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "pending"; }, 15s))
      << Job(id, "state") << "\n"
      << host.Log();
  EXPECT_EQ("1", Job(id, "host_losses"));
  EXPECT_EQ("0", Job(id, "failures"));
  EXPECT_NE(std::string::npos, Job(id, "error").find("self-fenced")) << Job(id, "error");
  EXPECT_EQ(1, db_->Count("select count(*) from pgfleet.job_events where kind = 'lost' and "
                          "detail like '%self-fenced%' and job_id = " +
                          id));
  EXPECT_EQ("up", db_->Scalar("select state from pgfleet.hosts where id = 'h1'"));
  EXPECT_EQ(1, db_->Count("select count(*) from pgfleet.job_events where kind = 'running'"));
  EXPECT_EQ(0, db_->Count("select count(*) from pgfleet.allocation_drift"));
  // Logged once per state change, not per retry.
  EXPECT_TRUE(
      WaitFor([&] { return host.Log().find("self-fence lifted") != std::string::npos; }, 5s));
  std::string log = host.Log();
  EXPECT_EQ(1u, Occurrences(log, "no new ones until the database is back")) << log;
  EXPECT_EQ(1u, Occurrences(log, "self-fence lifted")) << log;
  EXPECT_LE(Occurrences(log, "database step failed"), 2u) << log;
  EXPECT_LE(Occurrences(log, "database unreachable") + Occurrences(log, "connection lost"), 2u)
      << log;

  // And new work runs again.
  std::string next = db_->Scalar("select pgfleet.submit(array['true'], 'manual')");
  db_->Scalar("select count(*) from pgfleet.assign_jobs('[{\"job\": " + next +
              ", \"host\": \"h1\"}]')");
  EXPECT_TRUE(WaitFor([&] { return Job(next, "state") == "succeeded"; }, 15s)) << host.Log();
}

TEST_F(HostdFencingTest, PostgresRestartMidRunLosesNoReport) {
  pg_ = std::make_unique<PrivatePostgres>();
  db_ = std::make_unique<TestDatabase>(pg_->admin_dsn(), true);
  cluster_ = std::make_unique<Cluster>(*db_);
  cluster_->StartScheduler("s1");
  Process& host = cluster_->StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  db_->Scalar(
      "insert into pgfleet.jobs (command, formation, cpu, memory)"
      " select array['sh', '-c', 'sleep 3; echo done-' || g], 'outage', 100, 32"
      "   from generate_series(1, 20) g");
  ASSERT_TRUE(WaitFor(
      [&] { return db_->Count("select count(*) from pgfleet.jobs where state = 'running'") == 20; },
      30s))
      << cluster_->Logs();
  std::vector<std::pair<pid_t, int64_t>> procs;
  {
    auto c = db_->Connect();
    pqxx::work tx(*c);
    for (const auto& r : tx.exec("select pid from pgfleet.jobs")) {
      pid_t pid = r[0].as<int>();
      procs.emplace_back(pid, hostd::attempt::ProcStartTime(pid));
    }
  }

  pg_->Stop();
  for (auto& [pid, start] : procs) EXPECT_TRUE(Alive(pid, start)) << pid;
  // Every job finishes while the database is down; hostd keeps the reports.
  EXPECT_TRUE(WaitFor(
      [&] {
        for (auto& [pid, start] : procs) {
          if (Alive(pid, start)) return false;
        }
        return true;
      },
      8s));
  std::this_thread::sleep_for(500ms);
  pg_->Start();

  ASSERT_TRUE(WaitFor(
      [&] {
        return db_->Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == 20;
      },
      30s))
      << db_->Scalar(
             "select string_agg(state || ':' || n, ', ') from (select state, count(*) n"
             " from pgfleet.jobs group by state) x")
      << "\n"
      << cluster_->Logs();
  EXPECT_EQ(0, db_->Count("select count(*) from (select job_id from pgfleet.job_events where"
                          " kind = 'running' group by job_id having count(*) <> 1) x"));
  EXPECT_EQ(20, db_->Count("select count(distinct job_id) from pgfleet.job_events where kind = "
                           "'running'"));
  EXPECT_EQ(0, db_->Count("select count(*) from pgfleet.jobs where attempt <> 1"));
  EXPECT_EQ(0, db_->Count("select count(*) from pgfleet.job_events where kind = 'lost'"));
  EXPECT_EQ(20, db_->Count("select count(*) from pgfleet.jobs where output_tail = 'done-' ||"
                           " substr(command[3], length('sleep 3; echo done-') + 1) || E'\\n'"));
  EXPECT_EQ(0, db_->Count("select count(*) from pgfleet.allocation_drift"));
  std::string log = host.Log();
  EXPECT_LE(Occurrences(log, "database unreachable") + Occurrences(log, "connection lost"), 2u)
      << log;
  EXPECT_EQ(0u, Occurrences(log, "self-fenced")) << log;
}

}  // namespace
}  // namespace pgfleet::testing::fencing
