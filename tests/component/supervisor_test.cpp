// The supervisor's state machine against a fake runner (AttemptRunner):
// which attempts it claims, starts, signals and reports, and when, with no
// database, no shim, no process. The runner's contract is attempt_runner.h's.

#include "hostd/supervisor/supervisor.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hostd/network/cni_config.h"

namespace pgfleet::hostd {
namespace {

using Key = std::pair<int64_t, int>;

// Claims in memory; Start succeeds (unless told to fail) and the attempt
// runs until the test ends it; every signal is recorded.
class FakeRunner : public AttemptRunner {
 public:
  struct Shared {
    std::mutex mu;
    std::set<Key> claims;
    std::vector<Key> started;
    std::vector<std::pair<Key, int>> signals;
    std::map<Key, Ended> running;
    std::string fail_start;  // non-empty: Start fails with it
    std::vector<attempt::ShimRequest> requests;  // every request Start got
  };
  explicit FakeRunner(Shared* s) : s_(s) {}

  Claim ClaimAttempt(int64_t job, int attempt, const std::string&, std::string*) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    return s_->claims.insert({job, attempt}).second ? Claim::kClaimed : Claim::kTaken;
  }
  void RecordStartFailed(int64_t, int, const std::string&) override {}
  bool Start(const attempt::ShimRequest& req, Started* out, std::string* error) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (!s_->fail_start.empty()) {
      *error = s_->fail_start;
      return false;
    }
    s_->started.push_back({req.job_id, req.attempt});
    s_->requests.push_back(req);
    if (req.network) out->address = "10.89.0." + std::to_string(req.job_id);
    out->job_pid = 4000 + static_cast<pid_t>(req.job_id);
    out->shim.pid = 9000 + static_cast<pid_t>(req.job_id);
    return true;
  }
  void Await(int64_t job, int attempt, Ended ended) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->running[{job, attempt}] = std::move(ended);
  }
  void Signal(int64_t job, int attempt, const Started&, int shim_signal) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->signals.push_back({{job, attempt}, shim_signal});
  }
  std::string OutputTail(int64_t, int) const override { return ""; }
  void MarkReported(int64_t, int, const std::string&) override {}
  std::string LogPath(int64_t, int) const override { return ""; }
  bool RunsProcesses() const override { return false; }

 private:
  Shared* s_;
};

class SupervisorTest : public ::testing::Test {
 protected:
  void Make(const std::string& driver = "container",
            std::optional<network::NetworkOptions> bridge = std::nullopt) {
    SupervisorOptions o;
    o.host_id = "h1";
    o.driver = driver;
    o.host_address = "192.0.2.7";
    o.bridge = std::move(bridge);
    if (!o.bridge) o.bridge_missing = "no bridge network: CNI plugin portmap not found in /x";
    sup_ = std::make_unique<Supervisor>(
        o,
        [this](model::Report r) {
          std::lock_guard<std::mutex> lock(mu_);
          reports_.push_back(std::move(r));
        },
        std::make_unique<FakeRunner>(&runner_));
  }
  void SetUp() override { Make(); }

  Supervisor::StartResult Start(int64_t job, int attempt, const std::string& uid = "u",
                                bool privileged = false, const std::string& net = "none") {
    model::JobSpec spec;
    spec.command = {"true"};
    spec.uid = uid;
    spec.privileged = privileged;
    spec.network = net;
    std::string error;
    auto r = sup_->Start(job, attempt, spec, &error);
    last_error_ = error;
    return r;
  }
  // The runner ends the attempt (the callback the supervisor gave Await).
  void End(int64_t job, int attempt, int exit_code) {
    Ended ended;
    {
      std::lock_guard<std::mutex> lock(runner_.mu);
      auto it = runner_.running.find({job, attempt});
      ASSERT_NE(it, runner_.running.end()) << job << "-" << attempt << " is not running";
      ended = std::move(it->second);
      runner_.running.erase(it);
    }
    attempt::Outcome o;
    o.status.exit_code = exit_code;
    ended(o);
  }
  using Ended = AttemptRunner::Ended;
  // The reports so far, as "job-attempt kind[ exit_code][: error]".
  std::vector<std::string> Reports() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& r : reports_) {
      std::string s = std::to_string(r.job) + "-" + std::to_string(r.attempt) + " " +
                      std::string(model::ToString(r.kind));
      if (r.kind == model::ReportKind::kExited) s += " " + std::to_string(r.exit_code);
      if (!r.error.empty()) s += ": " + r.error;
      out.push_back(s);
    }
    return out;
  }
  // The signals the runner got, once there are at least n (stops and
  // kills are sent from the supervisor's stop threads): at most 5 s.
  std::vector<std::pair<Key, int>> Signals(size_t n = 0) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard<std::mutex> lock(runner_.mu);
        if (runner_.signals.size() >= n) return runner_.signals;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::lock_guard<std::mutex> lock(runner_.mu);
    return runner_.signals;
  }

  FakeRunner::Shared runner_;
  std::mutex mu_;
  std::vector<model::Report> reports_;
  std::unique_ptr<Supervisor> sup_;
  std::string last_error_;
};

TEST_F(SupervisorTest, AnAttemptStartsOnceReportsRunningThenItsOutcome) {
  EXPECT_EQ(Start(1, 1), Supervisor::StartResult::kStarted);
  EXPECT_EQ(Start(1, 1), Supervisor::StartResult::kAlready);
  EXPECT_EQ(runner_.started.size(), 1u);
  EXPECT_TRUE(sup_->Live(1, 1));
  End(1, 1, 3);
  EXPECT_EQ(Reports(), (std::vector<std::string>{"1-1 running", "1-1 exited 3"}));
  EXPECT_FALSE(sup_->Live(1, 1));
  // A second attempt of the job is another claim.
  EXPECT_EQ(Start(1, 2), Supervisor::StartResult::kStarted);
}

TEST_F(SupervisorTest, AStopBeforeStartClaimsTheAttemptSoItNeverStarts) {
  EXPECT_TRUE(sup_->StopBeforeStart(7, 1));
  EXPECT_FALSE(sup_->StopBeforeStart(7, 1));
  EXPECT_NE(Start(7, 1), Supervisor::StartResult::kStarted);
  EXPECT_TRUE(runner_.started.empty());
  auto reports = Reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].rfind("7-1 start_failed: ", 0), 0u) << reports[0];
  EXPECT_NE(reports[0].find("stopped before it started"), std::string::npos) << reports[0];
}

TEST_F(SupervisorTest, FencingKillsLiveAttemptsAndRefusesStartsWithoutClaimingThem) {
  ASSERT_EQ(Start(1, 1), Supervisor::StartResult::kStarted);
  EXPECT_EQ(sup_->Fence("no heartbeat for 9.5 s"), 1u);
  EXPECT_EQ(Signals(1), (std::vector<std::pair<Key, int>>{{{1, 1}, attempt::kKillSignal}}));
  std::string why;
  EXPECT_TRUE(sup_->Fenced(&why));
  EXPECT_EQ(why, "no heartbeat for 9.5 s");
  // Nothing claimed, nothing reported: the attempt stays assigned for later.
  EXPECT_EQ(Start(2, 1), Supervisor::StartResult::kFenced);
  EXPECT_NE(last_error_.find("self-fenced"), std::string::npos) << last_error_;
  EXPECT_EQ(runner_.claims.count({2, 1}), 0u);
  End(1, 1, -1);
  auto reports = Reports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_NE(reports[1].find("no heartbeat for 9.5 s"), std::string::npos) << reports[1];
  sup_->Unfence();
  EXPECT_FALSE(sup_->Fenced(&why));
  EXPECT_EQ(Start(2, 1), Supervisor::StartResult::kStarted);
}

TEST_F(SupervisorTest, StopSignalsTheJobAndAForceStopKillsItAtOnce) {
  ASSERT_EQ(Start(3, 1), Supervisor::StartResult::kStarted);
  EXPECT_TRUE(sup_->Stop(3, 1));
  // SIGTERM now; the grace (10 s) is running.
  EXPECT_EQ(Signals(1), (std::vector<std::pair<Key, int>>{{{3, 1}, attempt::kStopSignal}}));
  // A force stop during the grace: SIGKILL at once, not at its end.
  EXPECT_TRUE(sup_->Stop(3, 0, /*force=*/true));  // 0: the job's latest attempt
  EXPECT_EQ(Signals(2).back(), std::make_pair(Key{3, 1}, attempt::kKillSignal));
  EXPECT_FALSE(sup_->Stop(99, 1)) << "an attempt this host does not have";
  End(3, 1, -1);
}

TEST_F(SupervisorTest, ARejectedAttemptIsKilledAndItsReportsCanBeReplayed) {
  ASSERT_EQ(Start(4, 1, "uid-4"), Supervisor::StartResult::kStarted);
  sup_->Rejected(4, 1, "other-uid");  // about another job's attempt: nothing to kill
  sup_->Rejected(4, 1, "uid-4");
  auto signals = Signals(1);
  ASSERT_EQ(signals.size(), 1u);
  EXPECT_EQ(signals[0], std::make_pair(Key{4, 1}, attempt::kKillSignal));
  End(4, 1, 0);
  sup_->MarkReported(4, 1, "uid-4", /*accepted=*/false);
  auto replay = sup_->Replay(4, 1);
  ASSERT_EQ(replay.size(), 2u);
  EXPECT_EQ(replay[0].kind, model::ReportKind::kRunning);
  EXPECT_TRUE(replay[1].final());
  EXPECT_TRUE(sup_->Replay(4, 1).empty()) << "replayed once";
}

TEST_F(SupervisorTest, AnotherDatabasesAttemptOfTheSameIdIsSetAsideAndKilled) {
  ASSERT_EQ(Start(5, 1, "old-db"), Supervisor::StartResult::kStarted);
  sup_->ForgetOtherJob(5, 1, "old-db");  // the same job: nothing to set aside
  EXPECT_TRUE(sup_->Known(5, 1));
  sup_->ForgetOtherJob(5, 1, "new-db");
  EXPECT_FALSE(sup_->Known(5, 1));
  auto signals = Signals(1);
  ASSERT_EQ(signals.size(), 1u);
  EXPECT_EQ(signals[0], std::make_pair(Key{5, 1}, attempt::kKillSignal));
  sup_->ForgetOtherJob(5, 1, "");  // no uid: nothing to judge
  // The old attempt's end reports nothing of it.
  size_t before = Reports().size();
  End(5, 1, 0);
  EXPECT_EQ(Reports().size(), before);
}

TEST_F(SupervisorTest, AHostThatDoesNotIsolateRunsNoUnprivilegedJob) {
  Make("process");
  EXPECT_EQ(Start(6, 1), Supervisor::StartResult::kFailed);
  EXPECT_NE(last_error_.find("does not isolate jobs"), std::string::npos) << last_error_;
  EXPECT_EQ(Start(6, 2, "u", /*privileged=*/true), Supervisor::StartResult::kStarted);
  auto reports = Reports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].rfind("6-1 start_failed", 0), 0u) << reports[0];
  EXPECT_EQ(reports[1], "6-2 running");
}

TEST_F(SupervisorTest, ABridgeJobStartsOnlyWhereTheHostOffersBridge) {
  Make("process");
  EXPECT_EQ(Start(7, 1, "u", /*privileged=*/true, "bridge"), Supervisor::StartResult::kFailed);
  EXPECT_EQ(last_error_,
            "network \"bridge\" needs the container driver: this host runs the process driver, "
            "which offers only networks host and none");
  Make("container");  // no working CNI configuration
  EXPECT_EQ(Start(7, 2, "u", false, "bridge"), Supervisor::StartResult::kFailed);
  EXPECT_EQ(last_error_,
            "network \"bridge\" is not available on this host: no bridge network: CNI plugin "
            "portmap not found in /x");
  network::NetworkOptions net;
  net.conflist = network::DefaultConfList({});
  net.bin_dirs = {"/usr/lib/cni"};
  Make("container", net);
  EXPECT_EQ(Start(7, 3, "u", false, "bridge"), Supervisor::StartResult::kStarted);
  EXPECT_EQ(Start(8, 1, "u", false, "none"), Supervisor::StartResult::kStarted);
  {
    std::lock_guard<std::mutex> lock(runner_.mu);
    ASSERT_EQ(runner_.requests.size(), 2u);
    EXPECT_TRUE(runner_.requests[0].network);   // the bridge job's shim attaches it
    EXPECT_FALSE(runner_.requests[1].network);  // the none job's has nothing to attach
    EXPECT_EQ(runner_.requests[0].host_address, "192.0.2.7");
  }
  // The address its shim reported goes with its running report.
  EXPECT_EQ(sup_->AddressOf(7, 3), "10.89.0.7");
  EXPECT_EQ(sup_->AddressOf(8, 1), "");
}

TEST_F(SupervisorTest, ADispatchedPortMustBeAGivenHostPort) {
  model::JobSpec spec;
  spec.command = {"true"};
  spec.network = "none";
  spec.ports = {{"http", 0}};
  std::string error;
  EXPECT_EQ(sup_->Start(9, 1, spec, &error), Supervisor::StartResult::kFailed);
  EXPECT_EQ(error,
            "ports.http must be the host port the attempt was given, 1 to 65535 (got 0 in the "
            "dispatched spec)");
  spec.ports = {{"http", 20001}};
  EXPECT_EQ(sup_->Start(9, 2, spec, &error), Supervisor::StartResult::kStarted);
}

TEST_F(SupervisorTest, AStartTheRunnerCannotMakeIsReportedStartFailed) {
  runner_.fail_start = "exec \"nope\": No such file or directory";
  EXPECT_EQ(Start(8, 1), Supervisor::StartResult::kFailed);
  EXPECT_EQ(Reports(), (std::vector<std::string>{
                           "8-1 start_failed: exec \"nope\": No such file or directory"}));
  EXPECT_EQ(Start(8, 1), Supervisor::StartResult::kAlready);
}

}  // namespace
}  // namespace pgfleet::hostd
