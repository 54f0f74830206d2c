// Robustness of the work itself (issue 14): one bad job, report or value
// affects only itself. A job cancelled before its dispatch arrived ends
// cancelled, replicas are capped, a report the database refuses is set
// aside while the host goes on, a dispatch batch over the body limit is
// split, and a job hostd refuses fails alone. Real daemons, real PostgreSQL.

#include <gtest/gtest.h>
#include <httplib.h>

#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "robustness_fixture.h"

namespace pgfleet::testing::robustness {
namespace {

TEST_F(RobustnessTest, AJobCancelledBeforeItsDispatchArrivedEndsCancelled) {
  // Assigned to h1 in the database but never dispatched (as a scheduler that
  // died after its commit leaves it), then cancelled: reconcile must end it.
  // All in one transaction: a reconcile (every second) that ran between the
  // assignment and the cancel would rightly start the job (it did, on a
  // loaded CI machine, when the cancel came from a separate `pgfleet stop`).
  db_.Scalar(
      "select pgfleet.submit(array['sleep', '600'], 'manual');"
      "select count(*) from pgfleet.assign_jobs(jsonb_build_array(jsonb_build_object("
      "  'job', (select max(id) from pgfleet.jobs), 'host', 'h1')));"
      "select pgfleet.cancel((select max(id) from pgfleet.jobs))");
  std::string id = db_.Scalar("select max(id) from pgfleet.jobs");
  EXPECT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "cancelled"; },
      20s))
      << db_.Scalar("select state || ' ' || coalesce(error, '') from pgfleet.jobs where id = " +
                    id);
  EXPECT_EQ(
      db_.Count("select count(*) from pgfleet.job_events where kind = 'running' and job_id = " +
                id),
      0);
}

TEST_F(RobustnessTest, ReplicasAreCappedAndTheCliTakesOnlyWholeNumbers) {
  auto r = cluster_->Cli(
      {"formation", "create", "web", "--kind", "service", "--replicas", "1", "--", "sleep", "600"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (std::string bad : {"3x", "", "1e3", " 2", "+3"}) {
    r = cluster_->Cli({"formation", "scale", "web", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("replicas must be a whole number >= 0"), std::string::npos) << r.err;
  }
  EXPECT_EQ(cluster_->Cli({"formation", "scale", "web", "-1"}).exit_code, 2);
  r = cluster_->Cli({"formation", "scale", "web", "2147483647"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("replicas must be <= 10000 (setting max_replicas"), std::string::npos)
      << r.err;
  EXPECT_EQ(db_.Scalar("select replicas from pgfleet.formations where name = 'web'"), "1");
  // By SQL too, and the setting moves the cap.
  EXPECT_THROW(db_.Scalar("update pgfleet.formations set replicas = 10001 where name = 'web'"),
               std::exception);
  db_.Scalar("insert into pgfleet.settings (name, value) values ('max_replicas', '20000')");
  db_.Scalar("update pgfleet.formations set replicas = 10001 where name = 'web'");
  db_.Scalar("update pgfleet.formations set replicas = 2 where name = 'web'");
  EXPECT_TRUE(WaitFor(
      [&] {
        return db_.Count(
                   "select count(*) from pgfleet.jobs where formation = 'web' and state = "
                   "'running'") == 2;
      },
      30s));
}

// Finding 2: one report the database refuses (the retry-backoff overflow did
// this) used to fail every step of its host: no heartbeat, a self-fence that
// killed the host's innocent jobs, re-registration, again and again. Now the
// batch is halved until the bad report is alone; it is set aside and retried
// alone, and everything else goes on.
TEST_F(RobustnessTest, AReportTheDatabaseRefusesIsSetAsideWhileTheHostHeartbeatsAndRunsTheRest) {
  // Ending job "bad" fails in SQL, as a data error (numeric overflow).
  db_.Scalar(
      "create function test_refuse_end() returns trigger language plpgsql as $$ begin "
      "raise exception 'value out of range (test)' using errcode = '22003'; end $$");
  db_.Scalar(
      "create trigger refuse_end before update on pgfleet.jobs for each row when "
      "(new.env ? 'REFUSE_END' and new.state in ('succeeded', 'failed', 'pending')) "
      "execute function test_refuse_end()");
  std::string generation = db_.Scalar("select generation from pgfleet.hosts where id = 'h1'");
  std::string bad = db_.Scalar(
      "insert into pgfleet.jobs (command, env) values ('{sleep,0.2}', '{\"REFUSE_END\":\"1\"}') "
      "returning id");
  // Others finish while the bad report is stuck; some in the same batches.
  db_.Scalar("insert into pgfleet.jobs (command) select '{sleep,0.2}' from generate_series(1, 30)");
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == 30;
      },
      30s))
      << db_.Scalar("select string_agg(id || '=' || state, ' ') from pgfleet.jobs");
  ASSERT_TRUE(WaitFor([&] { return host_->Log().find("set aside") != std::string::npos; }, 10s));
  // Heartbeats went on: no fence, no new generation.
  std::this_thread::sleep_for(3s);  // well past the fence time were heartbeats stuck
  std::string log = host_->Log();
  EXPECT_EQ(std::string::npos, log.find("self-fenced")) << log;
  EXPECT_EQ(generation, db_.Scalar("select generation from pgfleet.hosts where id = 'h1'"));
  EXPECT_NE(std::string::npos, log.find("job=" + bad + " attempt=1 report exited set aside"))
      << log;
  EXPECT_NE(std::string::npos, log.find("value out of range (test)")) << log;
  EXPECT_EQ("running", db_.Scalar("select state from pgfleet.jobs where id = " + bad));
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(std::string::npos, metrics->body.find("pgfleet_host_reports_quarantined_total 1"))
      << metrics->body;
  EXPECT_EQ(31, db_.Count("select count(*) from pgfleet.job_events where kind = 'running'"));
  EXPECT_EQ(0, db_.AttemptsWithRepeated("running"));

  // Once the database takes it, the report set aside goes through.
  db_.Scalar("drop trigger refuse_end on pgfleet.jobs");
  EXPECT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + bad) == "succeeded"; },
      10s))
      << host_->Log();
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs where attempt <> 1"));
  ExpectHostdAlive();
}

// Finding 4: 500 jobs with a 2.5 KB env each made one dispatch body over
// hostd's 1 MiB limit: HTTP 413 on every pass, the host suspended, the jobs
// delayed for minutes. Now a host's batch is split by size.
TEST_F(RobustnessTest, ADispatchBatchOverTheBodyLimitIsSplitAndEveryJobRunsOnce) {
  db_.Scalar(
      "insert into pgfleet.jobs (formation, command, cpu, memory, env) select 'wide', '{true}', "
      "1, 1, jsonb_build_object('PAD', repeat('p', 2500)) from generate_series(1, 500)");
  EXPECT_TRUE(WaitFor(
      [&] {
        return db_.Count(
                   "select count(*) from pgfleet.jobs where formation = 'wide' and "
                   "state = 'succeeded'") == 500;
      },
      120s))
      << db_.Scalar(
             "select string_agg(state || '=' || n, ' ') from (select state, count(*) n "
             "from pgfleet.jobs group by state) s");
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_events where kind = 'requeued'"))
      << db_.Scalar("select min(detail) from pgfleet.job_events where kind = 'requeued'");
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs where attempt <> 1"));
  EXPECT_EQ(0, db_.Count("select coalesce(sum(suspensions), 0) from pgfleet.hosts"));
  ExpectHostdAlive();
}

// Finding 3: one job hostd refuses failed its whole dispatch batch (HTTP 400),
// so every job of it, of any formation, went back to pending, again and again.
// Now each job of a batch is accepted or refused on its own.
TEST_F(RobustnessTest, OneRefusedJobInADispatchBatchFailsAloneWithItsReason) {
  std::string batch = R"({"jobs":[
      {"job":900001,"attempt":1,"spec":{"command":["true"],"privileged":true}},
      {"job":900002,"attempt":1,"spec":{"command":["true"],"env":{"=x":"y"}}},
      {"job":900003,"attempt":1,"spec":{"command":["true"],"cpu":-5}},
      {"job":900004,"attempt":1,"spec":{"command":["true"],"privileged":true}}]})";
  auto res = client_->Post("/v1/jobs", SignDispatch(db_, "h1", batch), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(200, res->status) << res->body;
  auto results = nlohmann::json::parse(res->body)["results"];
  ASSERT_EQ(4u, results.size()) << res->body;
  EXPECT_EQ("started", results[0]["status"]) << res->body;
  EXPECT_EQ("failed", results[1]["status"]) << res->body;
  EXPECT_NE(std::string::npos, results[1]["error"].get<std::string>().find(
                                   "env names must be non-empty and contain no '='"))
      << res->body;
  EXPECT_EQ("failed", results[2]["status"]) << res->body;
  EXPECT_NE(std::string::npos, results[2]["error"].get<std::string>().find("cpu must be > 0"))
      << res->body;
  EXPECT_EQ("started", results[3]["status"]) << res->body;
  ExpectHostdAlive();
}

}  // namespace
}  // namespace pgfleet::testing::robustness
