// The container driver against the real kernel: a job's process, its
// environment and network, signals through the container's init (SIGTERM
// to a handler, to none, ignored; orphans reaped), start errors as
// DriverErrors, and starts from several threads at once. Needs root and
// cgroups (container_fixture.h says why tests fail, never skip).

#include <signal.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "container_security_fixture.h"

namespace pgfleet::hostd::testing_container {
namespace {

TEST_F(ContainerSecurityTest, EnvironmentIsTheSpecsPlusPathAndTheJobsIds) {
  RunRequest req = Request({"env"});
  req.spec.env = {{"GREETING", "hello world"}};
  Result r = Run(req);
  ASSERT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output,
            "GREETING=hello world\n"
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
            "PGFLEET_JOB_ID=" + std::to_string(req.job_id) + "\n" +
            "PGFLEET_ATTEMPT=" + std::to_string(req.attempt) + "\n");
}

TEST_F(ContainerSecurityTest, NetworkNoneLeavesOnlyLoopback) {
  RunRequest req = Request({"cat", "/proc/net/dev"});
  req.spec.network = "none";
  Result r = Run(req);
  ASSERT_EQ(r.status.exit_code, 0) << r.output;
  auto lines = Lines(r.output);
  ASSERT_EQ(lines.size(), 3u) << r.output;  // two header lines and lo
  EXPECT_EQ(Trim(lines[2]).rfind("lo:", 0), 0u) << r.output;

  RunRequest lo = Request({"ifconfig", "lo"});
  lo.spec.network = "none";
  Result l = Run(lo);
  EXPECT_NE(l.output.find("UP LOOPBACK"), std::string::npos) << l.output;

  RunRequest host = Request({"cat", "/proc/net/dev"});
  Result h = Run(host);
  EXPECT_EQ(Lines(h.output).size(), Lines(ReadFile("/proc/net/dev")).size()) << h.output;
}

TEST_F(ContainerSecurityTest, SigtermReachesAJobThatHandlesIt) {
  auto exec =
      driver_->Start(Request({"sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.05; done"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  exec->Signal(SIGTERM);
  ExitStatus s = exec->Wait();
  EXPECT_EQ(s.exit_code, 7);
}

TEST_F(ContainerSecurityTest, SigtermEndsAJobWithoutAHandlerAndSigkillOneThatIgnoresIt) {
  // The job is not PID 1 (the container's init is): a signal it has no
  // handler for acts as it would anywhere else.
  auto exec = driver_->Start(Request({"sleep", "100"}));
  exec->Signal(SIGTERM);
  ExitStatus s = exec->Wait();
  EXPECT_EQ(s.signal, SIGTERM);
  EXPECT_EQ(s.exit_code, -1);
  exec->Signal(SIGKILL);  // after exit: does nothing

  auto deaf = driver_->Start(Request({"sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  deaf->Signal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string stat = ReadFile("/proc/" + std::to_string(deaf->pid()) + "/stat");
  ASSERT_FALSE(stat.empty()) << "a job that ignores SIGTERM ended on it";
  deaf->Signal(SIGKILL);
  s = deaf->Wait();
  EXPECT_EQ(s.signal, SIGKILL);
}

TEST_F(ContainerSecurityTest, TheInitReapsOrphansAndEndsWithTheJob) {
  // The job leaves a child behind that outlives it by far: the container
  // (and the Wait) ends with the job, not with the orphan.
  auto t0 = std::chrono::steady_clock::now();
  auto exec = driver_->Start(Request({"sh", "-c", "sleep 300 & sleep 0.2; exit 4"}));
  ExitStatus s = exec->Wait();
  EXPECT_EQ(s.exit_code, 4);
  EXPECT_EQ(s.signal, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST_F(ContainerSecurityTest, ExecFailureIsADriverError) {
  RunRequest req = Request({"no-such-command"});
  try {
    driver_->Start(req);
    FAIL() << "Start succeeded";
  } catch (const DriverError& e) {
    EXPECT_STREQ(e.what(), "exec \"no-such-command\": No such file or directory");
  }
}

TEST_F(ContainerSecurityTest, MissingRootfsIsADriverErrorNamingIt) {
  RunRequest req = Request({"true"});
  req.spec.rootfs = "no-such-image";
  try {
    driver_->Start(req);
    FAIL() << "Start succeeded";
  } catch (const DriverError& e) {
    EXPECT_NE(std::string(e.what()).find("rootfs \"no-such-image\" not found"), std::string::npos)
        << e.what();
  }
}

TEST_F(ContainerSecurityTest, UnknownUserIsADriverError) {
  RunRequest req = Request({"true"});
  req.spec.user = "no-such-user";
  EXPECT_THROW(driver_->Start(req), DriverError);
}

TEST_F(ContainerSecurityTest, JobsStartConcurrentlyFromSeveralThreads) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        RunRequest req;
        {
          static std::mutex mu;
          std::lock_guard<std::mutex> lock(mu);
          req = Request({"hostname"});
        }
        Result r = Run(req);
        if (r.status.exit_code == 0 && r.output == std::to_string(req.job_id) + "\n") ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 80);
}

}  // namespace
}  // namespace pgfleet::hostd::testing_container
