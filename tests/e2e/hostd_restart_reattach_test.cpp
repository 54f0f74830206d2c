// hostd restarts keep jobs running: each job runs under its own shim process
// (`pgfleet-hostd shim`), so kill -9 of hostd leaves the job and its pid
// alone, a restarted hostd re-attaches to it (and can still stop it), and an
// exit that happens while hostd is down is reported with its real exit code,
// once, when hostd is back. Real processes (PostgreSQL from scripts/test,
// pgfleet-schedulerd, pgfleet-hostd), for the process and the container
// driver: this file instantiates every HostdRestartTest for both.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "hostd/attempt/attempt_dir.h"
#include "hostd_restart_fixture.h"

namespace pgfleet::testing::restart {
namespace {

TEST_P(HostdRestartTest, JobKeepsRunningWithTheSamePidThroughTenKill9s) {
  std::string id =
      db_.Scalar("select pgfleet.submit(array['sleep', '600'], stop_grace_seconds => 2)");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "running"; }, 30s)) << cluster_->Logs();
  pid_t pid = std::stoi(Job(id, "pid"));
  int64_t start = hostd::attempt::ProcStartTime(pid);
  ASSERT_TRUE(SameProcess(pid, start));
  ASSERT_NE(std::string::npos, Cmdline(pid).find("sleep 600")) << Cmdline(pid);

  for (int round = 1; round <= 10; ++round) {
    long long gen = Generation();
    host_proc_->Kill9();
    ASSERT_TRUE(SameProcess(pid, start)) << "round " << round << ": the job died with hostd";
    StartHost();
    // Registered again, and re-attached: the API knows the job, running, same pid.
    ASSERT_TRUE(WaitFor([&] { return Generation() > gen; }, 20s)) << "round " << round << "\n"
                                                                  << cluster_->Logs();
    nlohmann::json api;
    ASSERT_TRUE(WaitFor(
        [&] {
          api = ApiJob(id);
          return api.is_object() && api.value("state", "") == "running";
        },
        10s))
        << "round " << round << ": " << api.dump();
    EXPECT_EQ(pid, api.value("pid", 0)) << "round " << round;
    EXPECT_EQ(1, api.value("attempt", 0)) << "round " << round;
    EXPECT_TRUE(SameProcess(pid, start)) << "round " << round;
    EXPECT_EQ("running", Job(id, "state")) << "round " << round;
    EXPECT_EQ(std::to_string(pid), Job(id, "pid")) << "round " << round;
    EXPECT_EQ("1", Job(id, "attempt")) << "round " << round;
    if (HasFailure()) return;
  }
  // The reconcile after the last start has run (it runs right after
  // registering): it re-attached rather than reporting the attempt lost.
  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE(SameProcess(pid, start));
  EXPECT_EQ("running", Job(id, "state"));
  EXPECT_EQ(std::to_string(pid), Job(id, "pid"));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_events where kind = 'lost'"));
  EXPECT_EQ(
      1, db_.Count("select count(*) from pgfleet.job_events where kind = 'running' and job_id = " +
                   id));

  // The re-attached job is still under control: stopping it works (SIGTERM
  // through its shim, found again from the attempt directory; in a
  // container, forwarded to `sleep` by the container's init).
  auto stop = cluster_->Cli({"stop", id});
  EXPECT_EQ(0, stop.exit_code) << stop.err;
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "cancelled"; }, 20s)) << cluster_->Logs();
  EXPECT_EQ("15", Job(id, "signal"));
  EXPECT_FALSE(SameProcess(pid, start));
}

TEST_P(HostdRestartTest, JobThatExitsWhileHostdIsDownIsReportedWithItsExitCode) {
  std::string id =
      db_.Scalar("select pgfleet.submit(array['sh', '-c', 'echo bye; sleep 2; exit 7'])");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "running"; }, 30s)) << cluster_->Logs();
  host_proc_->Kill9();
  pid_t pid = std::stoi(Job(id, "pid"));
  std::this_thread::sleep_for(4s);  // the job exits (code 7) meanwhile
  EXPECT_EQ(-1, hostd::attempt::ProcStartTime(pid)) << "the job should have exited by now";
  EXPECT_EQ("running", Job(id, "state")) << "nobody could have reported it yet";
  StartHost();
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "failed"; }, 20s))
      << Job(id, "state") << "\n"
      << cluster_->Logs();
  EXPECT_EQ("7", Job(id, "exit_code"));
  EXPECT_EQ("", Job(id, "signal"));
  EXPECT_EQ("exit code 7", Job(id, "error"));
  EXPECT_EQ("bye\n", Job(id, "output_tail"));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_events where kind = 'lost'"));
  EXPECT_EQ(
      1, db_.Count("select count(*) from pgfleet.job_events where kind = 'running' and job_id = " +
                   id));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.allocation_drift"));

  // Reported once: a further restart does not report it again.
  long long events = db_.Count("select count(*) from pgfleet.job_events");
  long long gen = Generation();
  host_proc_->Kill9();
  StartHost();
  ASSERT_TRUE(WaitFor([&] { return Generation() > gen; }, 20s)) << cluster_->Logs();
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(events, db_.Count("select count(*) from pgfleet.job_events"));
  EXPECT_EQ(std::string::npos, host_proc_->Log().find("rejected")) << host_proc_->Log();
}

INSTANTIATE_TEST_SUITE_P(HostdRestart, HostdRestartTest, ::testing::Values("process", "container"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace pgfleet::testing::restart
