// hostd fenced by the database, with real processes: a host declared lost
// that comes back re-registers as a new generation and kills its superseded
// attempt (the whole process group), and its stale reports change nothing;
// an attempt dispatched before its assignment committed is reported once it
// has; an end the database lost (a failover, a restore) is reported again.

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <string>
#include <thread>
#include <vector>

#include "core/net/http.h"
#include "core/util/text.h"
#include "hostd_fencing_fixture.h"

namespace pgfleet::testing::fencing {
namespace {

TEST_F(HostdFencingTest, HostDeclaredLostComesBackAsANewGenerationAndKillsItsSupersededAttempt) {
  db_ = std::make_unique<TestDatabase>();
  cluster_ = std::make_unique<Cluster>(*db_);
  cluster_->StartScheduler("s1");
  Process& host = cluster_->StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  std::string id = db_->Scalar("select pgfleet.submit(array['sh', '-c', '" +
                               std::string(kJobWithChild) + "'], max_attempts => 3)");
  JobProcs first = Running(id, "h1", 1);
  ASSERT_FALSE(HasFailure());
  long long gen = Generation("h1");

  // Freeze hostd (no heartbeats, no reports) and do what the scheduler's
  // sweep does to a lost host: mark it lost, report its attempt lost, which
  // requeues the job as a new attempt.
  host.Signal(SIGSTOP);
  db_->Scalar("update pgfleet.hosts set state = 'lost' where id = 'h1'");
  EXPECT_EQ("t", db_->Scalar("select accepted from pgfleet.report_jobs('h1', " +
                             std::to_string(gen) + ", '[{\"job\": " + id +
                             ", \"attempt\": 1, \"kind\": \"lost\", \"error\": \"test\"}]')"));
  EXPECT_EQ("pending", Job(id, "state"));
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(first.AnyAlive()) << "nothing kills the attempt while hostd is frozen";
  host.Signal(SIGCONT);

  // Back: the heartbeat says "lost", hostd registers again (generation + 1)
  // and its reconcile kills attempt 1, the shell and its child alike.
  ASSERT_TRUE(WaitFor([&] { return Generation("h1") == gen + 1; }, 15s)) << cluster_->Logs();
  ASSERT_TRUE(WaitFor([&] { return !first.AnyAlive(); }, 10s))
      << "superseded attempt still alive: pid " << first.pid << " "
      << Alive(first.pid, first.pid_start) << ", child " << first.child << " "
      << Alive(first.child, first.child_start) << "\n"
      << cluster_->Logs();
  EXPECT_EQ("up", db_->Scalar("select state from pgfleet.hosts where id = 'h1'"));

  // The scheduler places attempt 2 (here, the host being up again); it runs
  // with a new process, and attempt 1's exit report was rejected as stale.
  JobProcs second = Running(id, "h1", 2);
  EXPECT_NE(first.pid, second.pid);
  ASSERT_TRUE(WaitFor(
      [&] { return host.Log().find("attempt=1 report exited rejected") != std::string::npos; },
      10s))
      << host.Log();
  std::this_thread::sleep_for(1s);  // any further stale report would have landed by now
  EXPECT_EQ("running", Job(id, "state"));
  EXPECT_EQ("2", Job(id, "attempt"));
  EXPECT_EQ("", Job(id, "exit_code"));
  EXPECT_EQ("0", Job(id, "failures"));
  // Attempt 1's story ends with the lost the "scheduler" wrote: nothing from its exit.
  EXPECT_EQ("assigned,running,lost",
            db_->Scalar("select string_agg(kind, ',' order by id) from pgfleet.job_events where "
                        "job_id = " +
                        id + " and attempt = 1"));
  EXPECT_EQ(1, db_->Count("select count(*) from pgfleet.job_events where kind = 'running' and "
                          "job_id = " +
                          id + " and attempt = 2"));
  EXPECT_EQ(0, db_->Count("select count(*) from pgfleet.allocation_drift"));
}

TEST_F(HostdFencingTest, AttemptDispatchedBeforeItsAssignmentCommittedIsReportedOnceItIs) {
  // A scheduler that dispatches an assignment it then rolls back, and later
  // assigns the same attempt for real: hostd already ran it (at most once per
  // job and attempt), its reports were rejected, so it reports them again
  // when the database finally says the attempt is assigned here.
  db_ = std::make_unique<TestDatabase>();
  cluster_ = std::make_unique<Cluster>(*db_);
  Process& host = cluster_->StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  std::string id = db_->Scalar("select pgfleet.submit(array['sh', '-c', 'echo early'], 'manual')");
  httplib::Client c(db_->Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
  c.set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
  auto res = c.Post("/v1/jobs",
                    SignDispatch(*db_, "h1",
                                 "{\"jobs\":[{\"job\":" + id +
                                     ",\"attempt\":1,\"spec\":{\"command\":[\"sh\",\"-c\","
                                     "\"echo early\"],\"privileged\":true}}]}"),
                    "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(200, res->status) << res->body;
  ASSERT_TRUE(
      WaitFor([&] { return host.Log().find("report exited rejected") != std::string::npos; }, 10s))
      << host.Log();
  EXPECT_EQ("pending", Job(id, "state"));
  db_->Scalar("select count(*) from pgfleet.assign_jobs('[{\"job\": " + id +
              ", \"host\": \"h1\"}]')");
  EXPECT_EQ("1", Job(id, "attempt"));
  // What the database learns is what really happened: the attempt finished
  // before its first rejected report, or the rejection killed it first (the
  // attempt was not assigned then: fencing). Either way it is reported now.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto state = Job(id, "state");
        return state == "succeeded" || state == "failed";
      },
      15s))
      << host.Log();
  const std::string output = util::ReadFile(cluster_->dir() + "/h1/jobs/" + id + "-1/output.log");
  if (Job(id, "state") == "succeeded") {
    EXPECT_EQ("early\n", Job(id, "output_tail"));
    EXPECT_EQ("early\n", output);
  } else {
    EXPECT_EQ("9", Job(id, "signal")) << host.Log();
    EXPECT_EQ(output, Job(id, "output_tail"));
  }
  EXPECT_EQ("1", Job(id, "attempt"));
  // It ran once: one running event, one attempt directory.
  EXPECT_EQ(1, db_->Count("select count(*) from pgfleet.job_events where kind = 'running'"));
  EXPECT_EQ(std::vector<std::string>{id + "-1"}, Subdirs(cluster_->dir() + "/h1/jobs"));
}

// An asynchronous standby promoted after the primary accepted a job's end,
// or a restore: the database shows the attempt running again, though it
// ended on the host and the host delivered its end. The host reports the
// outcome again at its next reconcile; the job does not stay running forever.
TEST_F(HostdFencingTest, AnEndTheDatabaseLostIsReportedAgain) {
  db_ = std::make_unique<TestDatabase>();
  cluster_ = std::make_unique<Cluster>(*db_);
  cluster_->StartScheduler("s1");
  Process& host = cluster_->StartHost("h1", 1000, 1000);
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  std::string id = db_->Scalar("select pgfleet.submit(array['sh', '-c', 'exit 3'])");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "failed"; }, 20s)) << cluster_->Logs();

  // The database as a standby that never saw the end would have it.
  std::string state = db_->Scalar(
      "alter table pgfleet.jobs disable trigger jobs_check_transition;"
      "update pgfleet.hosts h set cpu_allocated = h.cpu_allocated + j.cpu,"
      "  memory_allocated = h.memory_allocated + j.memory from pgfleet.jobs j"
      "  where j.id = " +
      id +
      " and h.id = j.host_id;"
      "update pgfleet.jobs set state = 'running', exit_code = null, finished_at = null,"
      "  error = null, output_tail = null where id = " +
      id +
      ";"
      "delete from pgfleet.job_events where job_id = " +
      id +
      " and kind not in ('created', 'assigned', 'running');"
      "alter table pgfleet.jobs enable trigger jobs_check_transition;"
      "select state from pgfleet.jobs where id = " +
      id);
  // (Read in the same transaction: the host's next reconcile may correct it
  // within a second, before a separate read.)
  ASSERT_EQ("running", state);

  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "failed"; }, 20s)) << host.Log();
  EXPECT_EQ("3", Job(id, "exit_code"));
  EXPECT_EQ("1", Job(id, "attempt"));
  EXPECT_NE(std::string::npos, host.Log().find("the database lost it")) << host.Log();
  EXPECT_EQ(1, db_->Count("select count(*) from pgfleet.job_events where kind = 'running'"));
  EXPECT_EQ(0, db_->Count("select count(*) from pgfleet.allocation_drift"));
  EXPECT_EQ(0, db_->Count("select cpu_allocated from pgfleet.hosts where id = 'h1'"));
}

}  // namespace
}  // namespace pgfleet::testing::fencing
