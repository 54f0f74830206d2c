// What becomes of a job when its shim goes, with hostd up or down: a job
// whose shim is killed is killed too and reported lost (and runs again), the
// cgroups of shims killed while hostd was down are removed when it is back,
// a job that cannot start fails at once with the driver's words, and a
// killed spare shim costs no start. Real processes, for the process and the
// container driver (instantiated in hostd_restart_reattach_test.cpp).

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "hostd/attempt/attempt_dir.h"
#include "hostd_restart_fixture.h"

namespace pgfleet::testing::restart {
namespace {

TEST_P(HostdRestartTest, JobWhoseShimIsKilledIsKilledTooAndReportedLost) {
  std::string id = db_.Scalar("select pgfleet.submit(array['sleep', '600'], max_attempts => 2)");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "running"; }, 30s)) << cluster_->Logs();
  pid_t pid = std::stoi(Job(id, "pid"));
  int64_t start = hostd::attempt::ProcStartTime(pid);
  auto state = hostd::attempt::ReadState(DataDir() + "/jobs/" + id + "-1");
  ASSERT_TRUE(state.started);
  ASSERT_EQ(pid, state.started->job.pid);
  ASSERT_TRUE(SameProcess(state.started->shim.pid, state.started->shim.start_time));
  kill(state.started->shim.pid, SIGKILL);
  // hostd sees the shim's lock go, kills the unwatched job, reports it lost;
  // the job is requeued and runs again as attempt 2.
  EXPECT_TRUE(WaitFor([&] { return !SameProcess(pid, start); }, 10s));
  ASSERT_TRUE(
      WaitFor([&] { return Job(id, "attempt") == "2" && Job(id, "state") == "running"; }, 30s))
      << Job(id, "state") << "\n"
      << cluster_->Logs();
  EXPECT_NE(
      std::string::npos,
      db_.Scalar("select detail from pgfleet.job_events where kind = 'lost' and job_id = " + id)
          .find("shim ended without recording"))
      << db_.Scalar(
             "select string_agg(kind || ': ' || coalesce(detail, ''), '; ') from "
             "pgfleet.job_events where job_id = " +
             id);
  EXPECT_NE(std::to_string(pid), Job(id, "pid"));
  if (driver() == "container") {
    // The killed shim could not delete attempt 1's cgroup; hostd did.
    EXPECT_TRUE(WaitFor([&] { return CgroupDirs(id + "-1").empty(); }, 5s))
        << Join(CgroupDirs(id + "-1"));
    EXPECT_FALSE(CgroupDirs(id + "-2").empty()) << "attempt 2 runs in its own cgroup";
  }
}

TEST_P(HostdRestartTest, CgroupsOfShimsKilledWhileHostdIsDownAndTheHostGroupAreRemoved) {
  if (driver() != "container") GTEST_SKIP() << "cgroups are the container driver's";
  std::string id = db_.Scalar("select pgfleet.submit(array['sleep', '600'])");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "running"; }, 30s)) << cluster_->Logs();
  auto state = hostd::attempt::ReadState(DataDir() + "/jobs/" + id + "-1");
  ASSERT_TRUE(state.started);
  ASSERT_FALSE(CgroupDirs(id + "-1").empty());
  // hostd first, then the shim: nobody is left to notice, and the shim had
  // no chance to delete its cgroup.
  host_proc_->Kill9();
  ASSERT_EQ(0, kill(state.started->shim.pid, SIGKILL));
  ASSERT_TRUE(WaitFor(
      [&] { return !SameProcess(state.started->shim.pid, state.started->shim.start_time); }, 5s));
  EXPECT_FALSE(CgroupDirs(id + "-1").empty()) << "the killed shim left its cgroup";

  StartHost();
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  // The new hostd found the attempt without its shim: killed what was left,
  // deleted the cgroup, reported the attempt lost (so it runs again).
  EXPECT_TRUE(WaitFor([&] { return CgroupDirs(id + "-1").empty(); }, 10s))
      << Join(CgroupDirs(id + "-1")) << cluster_->Logs();
  EXPECT_TRUE(ProcessGone(std::to_string(state.started->job.pid)));
  ASSERT_TRUE(
      WaitFor([&] { return Job(id, "attempt") == "2" && Job(id, "state") == "running"; }, 30s))
      << Job(id, "state") << cluster_->Logs();
  EXPECT_EQ(1,
            db_.Count("select count(*) from pgfleet.job_events where kind = 'lost' and job_id = " +
                      id + " and attempt = 1"));

  // Once nothing runs, a clean stop leaves no per-host group either.
  ASSERT_EQ(0, cluster_->Cli({"stop", id}).exit_code);
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "cancelled"; }, 30s)) << cluster_->Logs();
  EXPECT_TRUE(WaitFor([&] { return CgroupDirs(id + "-2").empty(); }, 10s));
  EXPECT_EQ(0, host_proc_->Stop());
  EXPECT_TRUE(CgroupDirs("").empty()) << Join(CgroupDirs(""));
}

TEST_P(HostdRestartTest, StartFailureComesBackAtOnceWithTheDriversMessage) {
  // Through the shim, a job that cannot start still fails at once with the
  // driver's own words, and nothing is left running or waiting on disk.
  std::string id = db_.Scalar("select pgfleet.submit(array['no-such-command-pgfleet'])");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "failed"; }, 20s)) << cluster_->Logs();
  EXPECT_EQ("exec \"no-such-command-pgfleet\": No such file or directory", Job(id, "error"));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_events where kind = 'running'"));
  auto state = hostd::attempt::ReadState(DataDir() + "/jobs/" + id + "-1");
  ASSERT_TRUE(state.outcome);
  EXPECT_EQ(model::ExitOutcome::kStartFailed, state.outcome->kind);
  EXPECT_FALSE(hostd::attempt::ShimAlive(DataDir() + "/jobs/" + id + "-1"));
}

// The processes whose parent is `parent` (from /proc/<pid>/stat), not zombies.
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 4 >= stat.size()) continue;
    char state = stat[close + 2];
    pid_t ppid = static_cast<pid_t>(std::atoi(stat.c_str() + close + 4));
    if (ppid == parent && state != 'Z') out.push_back(pid);
  }
  closedir(d);
  return out;
}

// The shim launcher keeps one shim forked ahead of the next start. Killed,
// that spare costs no start: the next job starts all the same (the launcher
// forks its shim then), once, and a new spare is made.
TEST_P(HostdRestartTest, AKilledSpareShimCostsNoStart) {
  std::string first = db_.Scalar("select pgfleet.submit(array['true'])");
  ASSERT_TRUE(WaitFor([&] { return Job(first, "state") == "succeeded"; }, 30s)) << cluster_->Logs();
  pid_t launcher = 0;
  for (pid_t p : ChildrenOf(host_proc_->pid())) {
    if (Cmdline(p).find("shim-launcher") != std::string::npos) launcher = p;
  }
  ASSERT_GT(launcher, 0) << "no shim launcher under hostd " << host_proc_->pid();
  // Its children once the first job's shim is gone: the spare alone.
  std::vector<pid_t> spares;
  ASSERT_TRUE(WaitFor(
      [&] {
        spares = ChildrenOf(launcher);
        return spares.size() == 1;
      },
      10s))
      << spares.size() << " children of the launcher";
  pid_t spare = spares[0];
  int64_t spare_start = hostd::attempt::ProcStartTime(spare);
  ASSERT_NE(std::string::npos, Cmdline(spare).find("shim-launcher")) << Cmdline(spare);
  kill(spare, SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return !SameProcess(spare, spare_start); }, 5s));

  std::string second = db_.Scalar("select pgfleet.submit(array['true'])");
  ASSERT_TRUE(WaitFor([&] { return Job(second, "state") == "succeeded"; }, 30s))
      << Job(second, "state") << " " << Job(second, "error") << "\n"
      << cluster_->Logs() << ShimLog();
  EXPECT_EQ("1", Job(second, "attempt"));
  EXPECT_EQ(1, db_.Count("select count(*) from pgfleet.job_events where kind = 'running' "
                         "and job_id = " +
                         second));
  // And a new spare waits for the next start.
  EXPECT_TRUE(WaitFor(
      [&] {
        auto now = ChildrenOf(launcher);
        return now.size() == 1 && now[0] != spare;
      },
      10s));
}

}  // namespace
}  // namespace pgfleet::testing::restart
