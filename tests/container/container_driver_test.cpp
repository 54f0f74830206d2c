// The container driver against the real kernel: isolation (PID, UTS, mount
// namespaces), cgroup limits and accounting, and what a job leaves behind.
// Needs root and cgroups (container_fixture.h says why tests fail, never skip).

#include "container_fixture.h"

namespace pgfleet::hostd::testing_container {
namespace {

TEST_F(ContainerDriverTest, PsShowsTheInitAsPid1TheJobAsPid2AndNoHostProcess) {
  Result r = Run(Request({"ps", "-o", "pid,comm"}));
  ASSERT_EQ(r.status.exit_code, 0) << r.output;
  auto lines = Lines(r.output);
  ASSERT_EQ(lines.size(), 3u) << "expected a header, the init and the job:\n" << r.output;
  EXPECT_EQ(Trim(lines[1]), "1 pgfleet-init") << r.output;
  EXPECT_EQ(Trim(lines[2]), "2 ps") << r.output;
}

TEST_F(ContainerDriverTest, ChildrenOfTheJobSeeOnlyTheJobAndItsInit) {
  Result r = Run(Request({"sh", "-c", "sleep 30 & ps -o pid,comm; kill %1"}));
  ASSERT_EQ(r.status.exit_code, 0) << r.output;
  auto lines = Lines(r.output);
  ASSERT_EQ(lines.size(), 5u) << r.output;
  EXPECT_EQ(Trim(lines[1]), "1 pgfleet-init");
  EXPECT_EQ(Trim(lines[2]), "2 sh");
  EXPECT_EQ(r.output.find(std::to_string(getpid())), std::string::npos) << r.output;
}

TEST_F(ContainerDriverTest, HostnameIsTheJobId) {
  RunRequest req = Request({"hostname"});
  Result r = Run(req);
  ASSERT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, std::to_string(req.job_id) + "\n");
}

TEST_F(ContainerDriverTest, HostShadowIsNotReadableInARootfs) {
  std::string shadow = ReadFile("/etc/shadow");
  ASSERT_FALSE(shadow.empty()) << "the host has no /etc/shadow to protect";
  Result r = Run(Request({"cat", "/etc/shadow"}));
  EXPECT_NE(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find(Lines(shadow).front()), std::string::npos) << r.output;
}

TEST_F(ContainerDriverTest, HostShadowIsNotReadableOnTheHostFilesystem) {
  std::string shadow = ReadFile("/etc/shadow");
  ASSERT_FALSE(shadow.empty());
  RunRequest req = Request({"/bin/cat", "/etc/shadow"});
  req.spec.rootfs.clear();  // the host's filesystem, read-only, as nobody
  Result r = Run(req);
  EXPECT_NE(r.status.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Permission denied"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(Lines(shadow).front()), std::string::npos) << r.output;
}

TEST_F(ContainerDriverTest, OomKillIsDetectedAndReported) {
  // busybox dd allocates its 200 MiB block and fills it from /dev/zero.
  RunRequest req = Request({"dd", "if=/dev/zero", "of=/dev/null", "bs=200M", "count=1"});
  req.spec.memory = 64;
  Result r = Run(req);
  EXPECT_TRUE(r.status.oom_killed)
      << "exit=" << r.status.exit_code << " signal=" << r.status.signal << " " << r.output;
  EXPECT_EQ(r.status.signal, SIGKILL);
  EXPECT_EQ(r.status.error, "out of memory (limit 64 MiB)");
  EXPECT_GT(r.status.peak_memory_bytes, 32 << 20);
  EXPECT_LE(r.status.peak_memory_bytes, int64_t{64} << 20);
}

TEST_F(ContainerDriverTest, OomKillOfAChildIsDetectedToo) {
  // The OOM victim is not PID 1: the shell survives it and exits normally.
  RunRequest req = Request({"sh", "-c", "dd if=/dev/zero of=/dev/null bs=200M count=1; exit 3"});
  req.spec.memory = 64;
  Result r = Run(req);
  EXPECT_EQ(r.status.exit_code, 3) << r.output;
  EXPECT_TRUE(r.status.oom_killed);
  EXPECT_EQ(r.status.error, "out of memory (limit 64 MiB)");
}

TEST_F(ContainerDriverTest, UsageIsRecordedForEveryJob) {
  RunRequest req = Request({"sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"});
  Result r = Run(req);
  EXPECT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_FALSE(r.status.oom_killed);
  EXPECT_TRUE(r.status.error.empty()) << r.status.error;
  EXPECT_GT(r.status.cpu_seconds, 0.05);
  EXPECT_GT(r.status.peak_memory_bytes, 0);
}

TEST_F(ContainerDriverTest, ForkBombIsContainedAndTheHostStaysResponsive) {
  RunRequest req = Request({"sh", "-c", "f() { f | f & }; f 2>/dev/null; exec sleep 1000"});
  req.spec.pids_max = 64;
  auto exec = driver_->Start(req);
  std::string pids_dir = Cgroups().Dir("pids", CgroupPath(req));
  int64_t most = 0;
  double slowest_host_spawn = 0;
  auto until = Clock::now() + std::chrono::seconds(3);
  while (Clock::now() < until) {
    int64_t current = std::atoll(ReadFile(pids_dir + "/pids.current").c_str());
    most = std::max(most, current);
    // The host can still start a process quickly.
    auto t0 = Clock::now();
    ASSERT_EQ(RunShell("/bin/true"), 0);
    slowest_host_spawn =
        std::max(slowest_host_spawn, std::chrono::duration<double>(Clock::now() - t0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string events = ReadFile(pids_dir + "/pids.events");
  auto t0 = Clock::now();
  exec->Signal(SIGKILL);
  ExitStatus s = exec->Wait();
  double stop_seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  EXPECT_LE(most, 64);
  // The container's init reaps the bomb's orphans at once, so the bomb
  // collapses and regrows between samples: it either was seen well above a
  // shell and a sleep, or it hit pids.max.
  EXPECT_TRUE(most >= 12 || events.rfind("max 0", 0) != 0)
      << "the bomb never grew (peak " << most << ", pids.events " << events << ")";
  EXPECT_LT(slowest_host_spawn, 1.0);
  EXPECT_LT(stop_seconds, 5.0);
  EXPECT_EQ(s.signal, SIGKILL);
}

TEST_F(ContainerDriverTest, HardCpuLimitHoldsTheJobNear200Millicores) {
  RunRequest req = Request({"sh", "-c", "while :; do :; done"});
  req.spec.cpu = 200;
  req.spec.cpu_hard_limit = true;
  auto start = Clock::now();
  auto exec = driver_->Start(req);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  exec->Signal(SIGKILL);
  ExitStatus s = exec->Wait();
  double wall = std::chrono::duration<double>(Clock::now() - start).count();
  double used = s.cpu_seconds / wall;
  EXPECT_GE(used, 0.1) << "cpu_seconds=" << s.cpu_seconds << " wall=" << wall;
  EXPECT_LE(used, 0.35) << "cpu_seconds=" << s.cpu_seconds << " wall=" << wall;
}

TEST_F(ContainerDriverTest, ThreeHundredJobsLeaveNoCgroupOrMountBehind) {
  std::set<std::string> mounts_before = MountTable();
  size_t fds_before = OpenFds();
  int failures = 0;
  auto start = Clock::now();
  for (int i = 0; i < 300; ++i) {
    // Every tenth job is killed while running, the way Stop ends a job.
    bool kill = i % 10 == 9;
    RunRequest req =
        Request(kill ? std::vector<std::string>{"sleep", "100"} : std::vector<std::string>{"true"});
    auto exec = driver_->Start(req);
    if (kill) exec->Signal(SIGKILL);
    ExitStatus s = exec->Wait();
    if (kill ? s.signal != SIGKILL : s.exit_code != 0) ++failures;
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(failures, 0);
  ExpectNoJobCgroups();
  std::set<std::string> mounts_after = MountTable();
  for (const auto& m : mounts_after) {
    EXPECT_TRUE(mounts_before.count(m)) << "host gained a mount:" << m;
  }
  EXPECT_EQ(mounts_before.size(), mounts_after.size());
  EXPECT_EQ(OpenFds(), fds_before) << "the driver leaks file descriptors";
  std::cout << "300 container jobs in " << seconds << " s (" << 300 / seconds << " jobs/s)\n";
}


}  // namespace
}  // namespace pgfleet::hostd::testing_container
