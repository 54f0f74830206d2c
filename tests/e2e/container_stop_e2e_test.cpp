// The container driver end to end: stopping jobs through the container's
// init (SIGTERM at once, a trap's own code, SIGKILL after the grace).

#include "container_e2e_fixture.h"

namespace pgfleet::testing::container_e2e {
namespace {

TEST_F(ContainerE2eTest, StopCancelsARunningJobWithinItsGraceAndRemovesItsCgroup) {
  const int grace = 2;
  std::string id =
      Submit({"--stop-grace", std::to_string(grace), "--rootfs", rootfs_, "--", "sleep", "60"});
  ASSERT_TRUE(WaitState(id, "running")) << JobsByState();
  std::vector<std::string> job_dirs;
  for (const auto& dir : HostCgroupDirs(host_)) job_dirs.push_back(dir + "/" + id + "-1");
  ASSERT_FALSE(job_dirs.empty());
  for (const auto& dir : job_dirs) EXPECT_TRUE(IsDir(dir)) << dir << " missing while it runs";

  auto t0 = Clock::now();
  CommandResult s = cluster_->Cli({"stop", id}, 30s);
  ASSERT_EQ(0, s.exit_code) << s.out << s.err;
  // grace + 8 s: the stop reaches hostd within a scheduler tick (0.5 s) or a
  // reconcile (1 s); the rest is margin for the report on a busy machine.
  ASSERT_TRUE(WaitState(id, "cancelled", std::chrono::seconds(grace + 8))) << JobsByState();
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  // The container's init forwards SIGTERM to sleep, which is not PID 1 and
  // so dies of it at once: no waiting out the grace.
  EXPECT_EQ(std::to_string(SIGTERM), Job(id, "signal"));
  EXPECT_LT(seconds, grace) << "the stop waited out the grace";
  EXPECT_EQ("t", Job(id, "peak_memory_bytes > 0 and cpu_seconds >= 0"));
  // The driver deletes the cgroup before it reports the exit.
  for (const auto& dir : job_dirs) EXPECT_FALSE(IsDir(dir)) << dir << " is left";
  for (const auto& dir : HostCgroupDirs(host_)) {
    EXPECT_TRUE(Subdirs(dir).empty()) << dir << " still has job cgroups";
  }
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.allocation_drift"));
}

TEST_F(ContainerE2eTest, AJobThatTrapsSigtermEndsWithItsOwnCodeAndOneThatIgnoresItIsKilled) {
  const int grace = 2;
  // sh as the job's main process: its trap runs on the forwarded SIGTERM.
  std::string trapping =
      Submit({"--stop-grace", std::to_string(grace), "--rootfs", rootfs_, "--", "sh", "-c",
              "trap 'echo got TERM; exit 7' TERM; while true; do sleep 0.1; done"});
  std::string deaf = Submit({"--stop-grace", std::to_string(grace), "--rootfs", rootfs_, "--",
                             "sh", "-c", "trap '' TERM; while true; do sleep 0.1; done"});
  ASSERT_TRUE(WaitState(trapping, "running")) << JobsByState();
  ASSERT_TRUE(WaitState(deaf, "running")) << JobsByState();
  auto t0 = Clock::now();
  CommandResult s = cluster_->Cli({"stop", trapping, deaf}, 30s);
  ASSERT_EQ(0, s.exit_code) << s.out << s.err;
  ASSERT_TRUE(WaitState(trapping, "cancelled", std::chrono::seconds(grace + 8))) << JobsByState();
  EXPECT_EQ("7", Job(trapping, "exit_code"));
  EXPECT_EQ("", Job(trapping, "signal"));
  EXPECT_NE(std::string::npos, Job(trapping, "output_tail").find("got TERM"));
  // The one that ignores SIGTERM is killed when its grace runs out.
  ASSERT_TRUE(WaitState(deaf, "cancelled", std::chrono::seconds(grace + 8))) << JobsByState();
  EXPECT_EQ(std::to_string(SIGKILL), Job(deaf, "signal"));
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - t0).count(), grace - 0.1);
}

// Live usage (host disk and insight issue, item 4): read from the job's cgroup.

}  // namespace
}  // namespace pgfleet::testing::container_e2e
