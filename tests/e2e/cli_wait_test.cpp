// `pgfleet wait JOB...` with real daemons (the first hour issue, item 8): it
// blocks until the jobs end, says on stderr what happens meanwhile (the
// pending reason, each attempt failed and retried), and exits with the job's
// exit code, or 1 if any of several did not succeed; --timeout gives up
// with 124 and leaves the jobs running.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <future>
#include <thread>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class CliWaitTest : public OneHostClusterTest {
 protected:
  std::string Submit(std::vector<std::string> args) {
    auto r = cluster_->Cli(std::move(args));
    EXPECT_EQ(0, r.exit_code) << r.err;
    return util::Trim(r.out);
  }
};

TEST_F(CliWaitTest, ExitsWithTheJobsExitCodeOnceItEnds) {
  std::string id = Submit({"run", "--", "sh", "-c", "sleep 1; exit 3"});
  auto t0 = Clock::now();
  auto r = cluster_->Cli({"wait", id}, 30s);
  EXPECT_EQ(3, r.exit_code) << r.err;
  EXPECT_EQ("failed", db_.Scalar("select state from pgfleet.jobs where id = " + id));
  EXPECT_NE(std::string::npos, r.err.find("job " + id + ": failed: exit code 3")) << r.err;
  EXPECT_LT(Clock::now() - t0, 20s);
  // Its registration as a waiter is gone with it.
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_waiters"));

  // A job that already ended: at once, with its code.
  auto again = cluster_->Cli({"wait", id}, 10s);
  EXPECT_EQ(3, again.exit_code) << again.err;
  std::string ok = Submit({"run", "--", "true"});
  EXPECT_EQ(0, cluster_->Cli({"wait", ok}, 30s).exit_code);
}

TEST_F(CliWaitTest, SeveralJobsFailWhenAnyFailsAndEachRetryIsTold) {
  std::string good = Submit({"run", "--", "true"});
  std::string bad = Submit({"run", "--max-attempts", "2", "--", "sh", "-c", "sleep 0.5; exit 4"});
  auto r = cluster_->Cli({"wait", good, bad}, 60s);
  EXPECT_EQ(1, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("job " + good + ": succeeded")) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("job " + bad + ": attempt 1 failed (exit code 4"))
      << r.err;
  EXPECT_NE(std::string::npos, r.err.find("retrying in")) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("job " + bad + ": failed: exit code 4")) << r.err;
}

TEST_F(CliWaitTest, APendingJobShowsWhyAndTimeoutLeavesItAlone) {
  // More memory than any host has: it stays pending, with a reason.
  std::string id = Submit({"run", "--memory", "100000", "--", "true"});
  ASSERT_TRUE(WaitFor(
      [&] { return !db_.Scalar("select error from pgfleet.jobs where id = " + id).empty(); }, 20s));
  auto t0 = Clock::now();
  auto r = cluster_->Cli({"wait", "--timeout", "2s", id}, 30s);
  double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(124, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("job " + id + ": pending: ")) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("timed out")) << r.err;
  EXPECT_GE(took, 1.9);
  EXPECT_LT(took, 10);
  EXPECT_EQ("pending", db_.Scalar("select state from pgfleet.jobs where id = " + id));

  // Stopped while waited for: wait ends at once with the cancellation.
  auto waited = std::async(std::launch::async, [&] { return cluster_->Cli({"wait", id}, 60s); });
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_.Count("select count(*) from pgfleet.job_waiters where job_id = " + id) == 1;
      },
      10s));
  ASSERT_EQ(0, cluster_->Cli({"stop", id}).exit_code);
  auto w = waited.get();
  EXPECT_EQ(1, w.exit_code) << w.err;
  EXPECT_NE(std::string::npos, w.err.find("job " + id + ": cancelled")) << w.err;
}

TEST_F(CliWaitTest, RunWaitSaysWhyItWaitsAndCtrlCLeavesTheJobOrStopsIt) {
  for (bool stop_it : {false, true}) {
    SCOPED_TRACE(stop_it ? "--stop-on-interrupt" : "default");
    std::vector<std::string> argv = {BinaryPath("pgfleet"), "run", "--wait", "--memory", "100000"};
    if (stop_it) argv.push_back("--stop-on-interrupt");
    argv.insert(argv.end(), {"--", "true"});
    std::string log = cluster_->dir() + "/run-wait-" + std::to_string(stop_it) + ".log";
    Process run(argv, log,
                {"PGFLEET_DB=" + db_.dsn(), "PGFLEET_TOKEN_FILE=" + cluster_->token_file()});
    // It says why the job is not running, rather than hanging silently.
    ASSERT_TRUE(WaitFor([&] { return run.Log().find(": pending: ") != std::string::npos; }, 20s))
        << run.Log();
    std::string id = db_.Scalar("select max(id) from pgfleet.jobs");
    run.Signal(SIGINT);
    ASSERT_TRUE(WaitFor([&] { return !run.Running(); }, 10s)) << run.Log();
    if (stop_it) {
      EXPECT_NE(std::string::npos, run.Log().find("stopping job " + id)) << run.Log();
      EXPECT_EQ("cancelled", db_.Scalar("select state from pgfleet.jobs where id = " + id));
    } else {
      int status = run.Stop();
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << status;
      EXPECT_NE(std::string::npos, run.Log().find("job " + id + " keeps running")) << run.Log();
      EXPECT_EQ("pending", db_.Scalar("select state from pgfleet.jobs where id = " + id));
    }
  }
}

TEST_F(CliWaitTest, BadArgumentsAreRefused) {
  auto none = cluster_->Cli({"wait"});
  EXPECT_EQ(2, none.exit_code);
  EXPECT_NE(std::string::npos, none.err.find("expected at least one JOB")) << none.err;
  auto bad = cluster_->Cli({"wait", "--timeout", "soon", "1"});
  EXPECT_EQ(2, bad.exit_code);
  EXPECT_NE(std::string::npos, bad.err.find("--timeout")) << bad.err;
  auto missing = cluster_->Cli({"wait", "999999"});
  EXPECT_EQ(1, missing.exit_code);
  EXPECT_NE(std::string::npos, missing.err.find("job 999999 does not exist")) << missing.err;
}

}  // namespace
}  // namespace pgfleet::testing
