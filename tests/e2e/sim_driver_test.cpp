// The sim driver (hostd/hollow/sim.h) under hostd's real supervisor: a job
// "runs" without a process for PGFLEET_SIM_SECONDS and exits with
// PGFLEET_SIM_EXIT_CODE; stop ends it with signal 15, fencing with signal 9;
// an attempt starts at most once.

#include <gtest/gtest.h>
#include <signal.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "hostd/hollow/sim.h"
#include "hostd/supervisor/supervisor.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using hostd::Supervisor;
using model::ReportKind;

// A sim supervisor whose reports land here.
class SimDriverTest : public ::testing::Test {
 protected:
  SimDriverTest()
      : supervisor_(Options(), [this](model::Report r) { Add(std::move(r)); },
                    std::make_unique<hostd::SimRunner>()) {}

  static hostd::SupervisorOptions Options() {
    hostd::SupervisorOptions o;
    o.host_id = "sim-test";
    o.driver = hostd::kSimDriver;
    o.keep_finished = 0ms;  // finished attempts are forgotten at once: only claims remain
    return o;
  }
  static model::JobSpec Spec(const std::string& seconds, const std::string& exit_code = "") {
    model::JobSpec spec;
    spec.command = {"true"};
    spec.network = "none";         // an unprivileged job's spec: nothing hostd refuses
    spec.stop_grace_seconds = 30;  // a sim stop must not wait for it
    if (!seconds.empty()) spec.env[hostd::kSimSecondsEnv] = seconds;
    if (!exit_code.empty()) spec.env[hostd::kSimExitCodeEnv] = exit_code;
    return spec;
  }
  void Add(model::Report r) {
    std::lock_guard<std::mutex> lock(mu_);
    reports_.push_back(std::move(r));
    cv_.notify_all();
  }
  // The final report of (job, attempt), waiting up to `timeout` for it.
  std::optional<model::Report> Outcome(int64_t job, int attempt,
                                       std::chrono::milliseconds timeout = 5s) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<model::Report> out;
    cv_.wait_for(lock, timeout, [&] {
      for (const auto& r : reports_) {
        if (r.job == job && r.attempt == attempt && r.final()) out = r;
      }
      return out.has_value();
    });
    return out;
  }
  size_t CountOf(int64_t job, int attempt, ReportKind kind) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& r : reports_) n += r.job == job && r.attempt == attempt && r.kind == kind;
    return n;
  }
  Supervisor::StartResult Start(int64_t job, int attempt, const model::JobSpec& spec) {
    std::string error;
    return supervisor_.Start(job, attempt, spec, &error);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<model::Report> reports_;
  Supervisor supervisor_;
};

TEST_F(SimDriverTest, JobRunsThenExitsWithTheSpecsExitCode) {
  ASSERT_EQ(Start(1, 1, Spec("", "7")), Supervisor::StartResult::kStarted);
  auto out = Outcome(1, 1);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->kind, ReportKind::kExited);
  EXPECT_EQ(out->exit_code, 7);
  EXPECT_EQ(out->signal, 0);
  EXPECT_EQ(CountOf(1, 1, ReportKind::kRunning), 1u);
  // "running" was reported before the exit.
  std::lock_guard<std::mutex> lock(mu_);
  ASSERT_GE(reports_.size(), 2u);
  EXPECT_EQ(reports_[0].kind, ReportKind::kRunning);
}

TEST_F(SimDriverTest, SimSecondsDelaysTheExit) {
  auto t0 = Clock::now();
  ASSERT_EQ(Start(2, 1, Spec("0.4")), Supervisor::StartResult::kStarted);
  EXPECT_TRUE(supervisor_.Live(2, 1));
  auto out = Outcome(2, 1);
  ASSERT_TRUE(out);
  EXPECT_GE(Clock::now() - t0, 400ms);
  EXPECT_EQ(out->exit_code, 0);
  EXPECT_FALSE(supervisor_.Live(2, 1));
}

TEST_F(SimDriverTest, StopEndsTheJobAtOnceWithSignal15) {
  ASSERT_EQ(Start(3, 1, Spec("600")), Supervisor::StartResult::kStarted);
  auto t0 = Clock::now();
  ASSERT_TRUE(supervisor_.Stop(3, 0));
  auto out = Outcome(3, 1);
  ASSERT_TRUE(out);
  EXPECT_LT(Clock::now() - t0, 2s);  // the spec's 30 s grace is not waited for
  EXPECT_EQ(out->kind, ReportKind::kExited);
  EXPECT_EQ(out->signal, SIGTERM);
  EXPECT_EQ(out->exit_code, -1);
}

// A start while fenced claims nothing and reports nothing (reported lost,
// each counted as a host loss, a host whose fence was about to lift failed
// jobs "lost 3 times"): the attempt stays assigned and starts after.
TEST_F(SimDriverTest, FenceKillsEveryLiveAttemptAndDefersNewOnesUntilItLifts) {
  for (int64_t job = 10; job < 13; ++job) {
    ASSERT_EQ(Start(job, 1, Spec("600")), Supervisor::StartResult::kStarted);
  }
  EXPECT_EQ(supervisor_.Fence("test fence"), 3u);
  // Lost with the host, not failed: the job did nothing wrong.
  for (int64_t job = 10; job < 13; ++job) {
    auto out = Outcome(job, 1);
    ASSERT_TRUE(out) << job;
    EXPECT_EQ(out->kind, ReportKind::kLost);
    EXPECT_EQ(out->error, "test fence");
  }
  EXPECT_EQ(supervisor_.LiveCount(), 0u);
  EXPECT_EQ(Start(13, 1, Spec("0")), Supervisor::StartResult::kFenced);
  EXPECT_FALSE(Outcome(13, 1, 300ms)) << "a deferred start reported an outcome";
  EXPECT_FALSE(supervisor_.Known(13, 1));
  supervisor_.Unfence();
  EXPECT_EQ(Start(13, 1, Spec("0")), Supervisor::StartResult::kStarted);
  EXPECT_TRUE(Outcome(13, 1));
  EXPECT_EQ(Start(14, 1, Spec("0")), Supervisor::StartResult::kStarted);
  EXPECT_TRUE(Outcome(14, 1));
}

TEST_F(SimDriverTest, AnAttemptNeverStartsTwice) {
  ASSERT_EQ(Start(20, 1, Spec("600")), Supervisor::StartResult::kStarted);
  EXPECT_EQ(Start(20, 1, Spec("0")), Supervisor::StartResult::kAlready);
  supervisor_.Kill(20, 1);
  ASSERT_TRUE(Outcome(20, 1));
  // Another attempt finishes, which prunes the first from memory
  // (keep_finished 0): its claim still holds.
  ASSERT_EQ(Start(21, 1, Spec("0")), Supervisor::StartResult::kStarted);
  ASSERT_TRUE(Outcome(21, 1));
  EXPECT_FALSE(supervisor_.Known(20, 1));
  EXPECT_EQ(Start(20, 1, Spec("0")), Supervisor::StartResult::kPreviousLife);
  EXPECT_EQ(CountOf(20, 1, ReportKind::kRunning), 1u);
  // A new attempt of the same job is a new start.
  EXPECT_EQ(Start(20, 2, Spec("0")), Supervisor::StartResult::kStarted);
}

// A host that ran job 40 attempt 1 for one database (uid A) runs job 40
// attempt 1 of another now (uid B; ForgetOtherJob dropped A's). The
// database's "no" to a report A's attempt left queued must not kill B's, nor
// mark it reported (JobIdentityTest's race, made certain here).
TEST_F(SimDriverTest, ARejectedReportOfAnotherJobsAttemptKillsNothing) {
  auto spec = Spec("600");
  spec.uid = "bbbbbbbb-0000-4000-8000-000000000002";
  ASSERT_EQ(Start(40, 1, spec), Supervisor::StartResult::kStarted);
  const std::string other = "aaaaaaaa-0000-4000-8000-000000000001";
  supervisor_.MarkReported(40, 1, other, false);
  supervisor_.Rejected(40, 1, other);
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(supervisor_.Live(40, 1)) << "another job's rejected report killed this one";
  EXPECT_FALSE(Outcome(40, 1, 0ms));
  // Its own rejection (or one of unknown uid) still kills it.
  supervisor_.Rejected(40, 1, spec.uid);
  auto out = Outcome(40, 1);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->signal, SIGKILL);
  EXPECT_FALSE(supervisor_.Live(40, 1));
}

TEST_F(SimDriverTest, AStopOfAnAttemptNeverSeenCreatesNothing) {
  EXPECT_FALSE(supervisor_.Stop(31, 1));
  EXPECT_FALSE(supervisor_.Known(31, 1));
  // So the job, dispatched later, runs.
  EXPECT_EQ(Start(31, 1, Spec("0")), Supervisor::StartResult::kStarted);
  auto out = Outcome(31, 1);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->kind, ReportKind::kExited);
}

TEST_F(SimDriverTest, StopBeforeStartMeansItNeverStarts) {
  ASSERT_TRUE(supervisor_.StopBeforeStart(30, 1));
  EXPECT_FALSE(supervisor_.StopBeforeStart(30, 1));
  auto out = Outcome(30, 1);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->kind, ReportKind::kStartFailed);
  EXPECT_EQ(Start(30, 1, Spec("0")), Supervisor::StartResult::kAlready);
}

TEST_F(SimDriverTest, MalformedSimValuesFailTheStartNamingTheField) {
  std::string error;
  EXPECT_EQ(supervisor_.Start(40, 1, Spec("soon"), &error), Supervisor::StartResult::kFailed);
  EXPECT_NE(error.find("env.PGFLEET_SIM_SECONDS"), std::string::npos) << error;
  EXPECT_NE(error.find("soon"), std::string::npos) << error;
  EXPECT_EQ(supervisor_.Start(41, 1, Spec("0", "300"), &error), Supervisor::StartResult::kFailed);
  EXPECT_NE(error.find("env.PGFLEET_SIM_EXIT_CODE"), std::string::npos) << error;
  auto out = Outcome(40, 1);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->kind, ReportKind::kStartFailed);
}

TEST_F(SimDriverTest, SimJobsHaveNoLogsAndNoProcess) {
  ASSERT_EQ(Start(50, 1, Spec("600")), Supervisor::StartResult::kStarted);
  EXPECT_FALSE(supervisor_.RunsProcesses());
  EXPECT_EQ(supervisor_.LogPath(50, 0), "");
  EXPECT_EQ(supervisor_.Latest(50)->pid, 0);
  EXPECT_EQ(supervisor_.Recover().adopted, 0);
  supervisor_.Kill(50, 1);
  EXPECT_TRUE(Outcome(50, 1));
}

TEST(SimTimerTest, EndsComeInDeadlineOrder) {
  hostd::SimTimer timer;
  std::mutex mu;
  std::vector<int64_t> order;
  auto runner = std::make_unique<hostd::SimRunner>(timer);
  for (int64_t job : {3, 1, 2}) {
    std::string error;
    ASSERT_EQ(runner->ClaimAttempt(job, 1, "", &error), hostd::AttemptRunner::Claim::kClaimed);
    hostd::attempt::ShimRequest req;
    req.job_id = job;
    req.attempt = 1;
    req.spec.env[hostd::kSimSecondsEnv] = std::to_string(0.1 * static_cast<double>(job));
    hostd::AttemptRunner::Started started;
    ASSERT_TRUE(runner->Start(req, &started, &error)) << error;
    runner->Await(job, 1, [&, job](hostd::attempt::Outcome) {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(job);
    });
  }
  auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (order.size() == 3) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  runner.reset();  // waits for an end being delivered; none come later
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(order, (std::vector<int64_t>{1, 2, 3}));
}

}  // namespace
}  // namespace pgfleet::testing
