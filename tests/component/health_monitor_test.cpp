// hostd's health monitor (hostd/health/health_monitor.h) over a real
// Supervisor running sim attempts (no process) and a scripted prober: a
// report only when health changes, an unhealthy attempt stopped with its
// exit report quoting the check, one check in flight per attempt; and the
// check kept in an attempt's directory for a restarted hostd.

#include "hostd/health/health_monitor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hostd/hollow/sim.h"

namespace pgfleet::hostd::health {
namespace {

using namespace std::chrono_literals;

// Passes or fails as the test says; counts its calls and the most at once.
class ScriptedProber : public HealthProber {
 public:
  explicit ScriptedProber(bool inline_checks) : inline_(inline_checks) {}
  ProbeResult Probe(const HealthTarget&) override {
    int now = ++in_flight_;
    int seen = most_.load();
    while (now > seen && !most_.compare_exchange_weak(seen, now)) {
    }
    if (!inline_) std::this_thread::sleep_for(delay_);
    ++calls_;
    --in_flight_;
    return {pass_.load(), pass_ ? "ok" : "exit code 1"};
  }
  bool Inline() const override { return inline_; }
  std::atomic<bool> pass_{true};
  std::atomic<int> calls_{0}, in_flight_{0}, most_{0};
  std::chrono::milliseconds delay_{0};

 private:
  const bool inline_;
};

class HealthMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SupervisorOptions o;
    o.host_id = "h1";
    o.driver = kSimDriver;
    sup_ = std::make_unique<Supervisor>(
        o,
        [this](model::Report r) {
          std::lock_guard<std::mutex> lock(mu_);
          reports_.push_back(std::move(r));
        },
        std::make_unique<SimRunner>());
  }
  void StartReplica(int64_t job, std::optional<model::HealthCheck> check) {
    model::JobSpec spec;
    spec.command = {"sleep", "1000"};
    spec.env["PGFLEET_SIM_SECONDS"] = "1000";
    spec.privileged = true;
    spec.uid = "u" + std::to_string(job);
    spec.health_check = std::move(check);
    std::string error;
    ASSERT_EQ(sup_->Start(job, 1, spec, &error), Supervisor::StartResult::kStarted) << error;
  }
  static model::HealthCheck Check(int threshold) {
    model::HealthCheck c;
    c.type = model::HealthCheckType::kTcp;
    c.port = 80;
    c.interval_seconds = 1;
    c.failure_threshold = threshold;
    return c;
  }
  // Health and exit reports so far, as "job kind[ health][: output or error]".
  std::vector<std::string> Reports() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& r : reports_) {
      if (r.kind == model::ReportKind::kRunning) continue;
      std::string s = std::to_string(r.job) + " " + std::string(model::ToString(r.kind));
      if (r.kind == model::ReportKind::kHealth) {
        s += " " + std::string(model::ToString(r.health)) + ": " + r.output;
      } else if (!r.error.empty()) {
        s += ": " + r.error;
      }
      out.push_back(s);
    }
    return out;
  }
  // Ticks the monitor as its thread would, `seconds` of checks (one a second).
  void Run(HealthMonitor& m, int seconds) {
    for (int i = 0; i < seconds * 10; ++i) {
      m.Tick();
      std::this_thread::sleep_for(100ms);
    }
  }
  std::mutex mu_;
  std::vector<model::Report> reports_;
  std::unique_ptr<Supervisor> sup_;
};

TEST_F(HealthMonitorTest, ReportsOnlyChangesAndStopsAnUnhealthyReplicaQuotingTheCheck) {
  auto prober = std::make_shared<ScriptedProber>(true);
  HealthMonitor monitor({sup_.get()}, prober);
  StartReplica(1, Check(2));
  StartReplica(2, std::nullopt);  // no check: never checked, never reported
  Run(monitor, 3);
  EXPECT_GE(prober->calls_.load(), 2);
  EXPECT_EQ(Reports(), std::vector<std::string>{"1 health healthy: ok"});

  prober->pass_ = false;
  for (int i = 0; i < 50 && Reports().size() < 3; ++i) Run(monitor, 1);
  EXPECT_EQ(Reports(),
            (std::vector<std::string>{"1 health healthy: ok", "1 health unhealthy: exit code 1",
                                      "1 exited: health check failed 2 times: exit code 1"}));
  EXPECT_FALSE(sup_->Live(1, 1));
  EXPECT_TRUE(sup_->Live(2, 1));
  // Ended: no more checks of it.
  const int calls = prober->calls_;
  Run(monitor, 2);
  EXPECT_EQ(prober->calls_.load(), calls);
}

TEST_F(HealthMonitorTest, OneCheckInFlightPerReplicaAndAtMostMaxInFlightInAll) {
  auto prober = std::make_shared<ScriptedProber>(false);
  prober->delay_ = 2500ms;  // longer than the interval
  HealthMonitor monitor({sup_.get()}, prober, HealthMonitorOptions{100ms, 3});
  for (int64_t j = 1; j <= 5; ++j) StartReplica(j, Check(3));
  for (int i = 0; i < 40; ++i) {
    monitor.Tick();
    EXPECT_LE(monitor.InFlight(), 3);
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_LE(prober->most_.load(), 3);
  // 4 s: each replica's first check took 2.5 s, so at most 3 + 2 started.
  EXPECT_LE(prober->calls_.load() + prober->in_flight_.load(), 6);
  for (int i = 0; i < 60 && monitor.InFlight() > 0; ++i) std::this_thread::sleep_for(100ms);
}

TEST(HealthCheckFile, KeptForARestartedHostdReadBackAndNeverThroughALink) {
  char tmpl[] = "/tmp/pgfleet-health-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  EXPECT_FALSE(attempt::ReadHealthCheck(dir));  // none written: no check
  model::HealthCheck c;
  c.type = model::HealthCheckType::kHttp;
  c.port = 8080;
  c.path = "/healthz";
  c.failure_threshold = 5;
  ASSERT_TRUE(attempt::WriteHealthCheck(dir, c));
  auto back = attempt::ReadHealthCheck(dir);
  ASSERT_TRUE(back);
  EXPECT_EQ(model::ToJson(*back), model::ToJson(c));
  const std::string file = dir + "/" + attempt::kHealthCheckFile;
  // Garbage or a hostile check reads as none; a link is never followed.
  for (const char* text : {"not json", R"({"type":"tcp","port":0})",
                           "[[[[[[[[[[[[[[[[[[[[[["
                           "[[[[[[[[[[[[[[[[[[[["}) {
    std::ofstream(file) << text;
    EXPECT_FALSE(attempt::ReadHealthCheck(dir)) << text;
  }
  unlink(file.c_str());
  ASSERT_EQ(0, symlink("/etc/passwd", file.c_str()));
  EXPECT_FALSE(attempt::ReadHealthCheck(dir));
  EXPECT_FALSE(attempt::WriteHealthCheck(dir, c));
  unlink(file.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace pgfleet::hostd::health
