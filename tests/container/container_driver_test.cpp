// The container driver against the real kernel: namespaces, pivot_root,
// cgroups through libcgroup. Needs root and the memory, cpu, cpuacct and pids
// controllers (CI has both); without them every test FAILS with the reason, it
// never skips. Each test case may run in its own process (ctest -j), so all
// state (data dir, rootfs, cgroup host name) is per process.

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hostd/drivers/cgroup.h"
#include "hostd/drivers/container.h"
#include "test_support.h"

namespace pgfleet::hostd {
namespace {

using pgfleet::testing::Subdirs;

using Clock = std::chrono::steady_clock;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = s.find_first_not_of(" \t");
  return i == std::string::npos ? std::string() : s.substr(i);
}

size_t OpenFds() {
  size_t n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (d && readdir(d)) ++n;
  if (d) closedir(d);
  return n;
}

std::set<std::string> MountTable() {
  std::set<std::string> out;
  for (auto& line : Lines(ReadFile("/proc/self/mountinfo"))) {
    // Drop the mount id and parent id: keep what is mounted where.
    std::istringstream in(line);
    std::string id, parent, rest;
    in >> id >> parent;
    std::getline(in, rest);
    out.insert(rest);
  }
  return out;
}

int RunShell(const std::string& cmd) { return std::system(cmd.c_str()); }

struct Result {
  ExitStatus status;
  std::string output;
  double wall_seconds = 0;
};

class ContainerDriverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/pgfleet-container-test-XXXXXX";
    char* dir = mkdtemp(tmpl);
    ASSERT_NE(dir, nullptr);
    root_ = dir;
    data_dir_ = root_ + "/data";
    host_ = "ctest-" + std::to_string(getpid());
    mkdir(data_dir_.c_str(), 0755);
    mkdir((root_ + "/jobs").c_str(), 0755);
    mkdir((root_ + "/logs").c_str(), 0755);
    // The busybox rootfs jobs name as "busybox", resolved under the data dir.
    rootfs_built_ = RunShell(std::string(PGFLEET_SOURCE_DIR) + "/scripts/make-rootfs busybox " +
                             data_dir_ + "/rootfs/busybox >/dev/null") == 0;
  }

  static void TearDownTestSuite() {
    // Nothing is mounted on the host, so a plain recursive delete is safe.
    if (!root_.empty()) RunShell("rm -rf '" + root_ + "'");
  }

  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "the container driver tests must run as root (CI does); "
                                "run them with sudo";
    std::string why;
    ASSERT_TRUE(ContainerDriverAvailable(&why))
        << "container driver unavailable on this machine: " << why;
    ASSERT_TRUE(rootfs_built_) << "scripts/make-rootfs failed; see its output above";
    DriverOptions opts;
    opts.data_dir = data_dir_;
    opts.host_id = host_;
    driver_ = MakeContainerDriver(opts);
    ASSERT_EQ(driver_->name(), "container");
  }

  void TearDown() override {
    ExpectNoJobCgroups();
    driver_.reset();
  }

  // A request for a job in the busybox rootfs, with a fresh work dir and log.
  RunRequest Request(std::vector<std::string> argv) {
    RunRequest r;
    r.job_id = next_job_++;
    r.attempt = 1;
    r.host_id = host_;
    r.spec.command = std::move(argv);
    r.spec.rootfs = "busybox";
    std::string name = std::to_string(r.job_id) + "-1";
    r.job_dir = root_ + "/jobs/" + name;
    mkdir(r.job_dir.c_str(), 0755);
    r.log_path = root_ + "/logs/" + name + ".log";
    return r;
  }

  Result Run(const RunRequest& r) {
    auto start = Clock::now();
    auto exec = driver_->Start(r);
    Result res;
    res.status = exec->Wait();
    res.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    res.output = ReadFile(r.log_path);
    return res;
  }

  std::string CgroupPath(const RunRequest& r) const {
    return "pgfleet/" + host_ + "/" + std::to_string(r.job_id) + "-" + std::to_string(r.attempt);
  }

  const CgroupSystem& Cgroups() const { return *CgroupSystem::Get(nullptr); }

  // No job cgroup of this test process is left in any controller.
  void ExpectNoJobCgroups() const {
    const CgroupSystem* sys = CgroupSystem::Get(nullptr);
    if (!sys) return;
    for (const auto& c : sys->controllers()) {
      auto left = Subdirs(sys->Dir(c, "pgfleet/" + host_));
      EXPECT_TRUE(left.empty()) << left.size() << " job cgroup(s) left in " << c << ", e.g. "
                                << left.front();
    }
  }

  static inline std::string root_, data_dir_, host_;
  static inline bool rootfs_built_ = false;
  static inline std::atomic<int64_t> next_job_{4200};
  std::unique_ptr<Driver> driver_;
};

TEST_F(ContainerDriverTest, PsShowsTheJobAsPid1AndNoHostProcess) {
  Result r = Run(Request({"ps", "-o", "pid,comm"}));
  ASSERT_EQ(r.status.exit_code, 0) << r.output;
  auto lines = Lines(r.output);
  ASSERT_EQ(lines.size(), 2u) << "expected a header and the job alone:\n" << r.output;
  EXPECT_EQ(Trim(lines[1]), "1 ps") << r.output;
}

TEST_F(ContainerDriverTest, ChildrenOfTheJobSeeOnlyTheJob) {
  Result r = Run(Request({"sh", "-c", "sleep 30 & ps -o pid,comm; kill %1"}));
  ASSERT_EQ(r.status.exit_code, 0) << r.output;
  auto lines = Lines(r.output);
  ASSERT_EQ(lines.size(), 4u) << r.output;
  EXPECT_EQ(Trim(lines[1]), "1 sh");
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
  EXPECT_GE(most, 32) << "the bomb never grew; is it running?";
  if (!Cgroups().unified()) {
    EXPECT_NE(events, "max 0\n") << "pids.max was never hit";
  }
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

TEST_F(ContainerDriverTest, NobodyCannotWriteOutsideWorkDirAndTmpInARootfs) {
  const char* script =
      "touch /work/ok || echo FAIL /work; touch /tmp/ok || echo FAIL /tmp;"
      "for p in /x /etc/x /bin/x /root/x /dev/x /proc/x /sys/x /work/../x; do"
      "  touch $p 2>/dev/null && echo WROTE $p; done; id -u";
  RunRequest req = Request({"sh", "-c", script});
  Result r = Run(req);
  EXPECT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "65534\n");
  struct stat st {};
  EXPECT_EQ(stat((req.job_dir + "/ok").c_str(), &st), 0) << "the work dir is not the job's";
}

TEST_F(ContainerDriverTest, NobodyCannotWriteOutsideWorkDirAndTmpOnTheHostFilesystem) {
  std::string script =
      "touch ./ok || echo FAIL work; touch /tmp/ok || echo FAIL /tmp;"
      "for p in /x /etc/x /usr/x /var/tmp/x /root/x /home/x /dev/x " +
      data_dir_ + "/x; do touch $p 2>/dev/null && echo WROTE $p; done; id -u";
  RunRequest req = Request({"/bin/sh", "-c", script});
  req.spec.rootfs.clear();
  Result r = Run(req);
  EXPECT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "65534\n");
  struct stat st {};
  EXPECT_EQ(stat((req.job_dir + "/ok").c_str(), &st), 0);
  EXPECT_NE(stat("/tmp/ok", &st), 0) << "the job wrote to the host's /tmp";
}

TEST_F(ContainerDriverTest, HostFilesystemModeHidesHostdDataDir) {
  RunRequest req = Request({"/bin/ls", data_dir_});
  req.spec.rootfs.clear();
  Result r = Run(req);
  EXPECT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("rootfs"), std::string::npos) << r.output;
}

TEST_F(ContainerDriverTest, NonRootJobHasNoCapabilitiesAndNoNewPrivs) {
  Result r = Run(Request(
      {"grep", "-E", "^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)", "/proc/self/status"}));
  ASSERT_EQ(r.status.exit_code, 0) << r.output;
  for (const auto& line : Lines(r.output)) {
    if (line.rfind("NoNewPrivs", 0) == 0) {
      EXPECT_EQ(Trim(line.substr(11)), "1") << line;
    } else {
      EXPECT_NE(line.find("0000000000000000"), std::string::npos) << line;
    }
  }
}

TEST_F(ContainerDriverTest, RootOnlyWhenAskedAndWithDockersCapabilities) {
  RunRequest req = Request({"sh", "-c", "id -u; grep CapBnd /proc/self/status"});
  req.spec.user = "root";
  Result r = Run(req);
  ASSERT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "0\nCapBnd:\t00000000a80425fb\n");
}

TEST_F(ContainerDriverTest, EnvironmentIsTheSpecsPlusPathAndTheJobsIds) {
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

TEST_F(ContainerDriverTest, NetworkNoneLeavesOnlyLoopback) {
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

TEST_F(ContainerDriverTest, SigtermReachesAJobThatHandlesIt) {
  auto exec =
      driver_->Start(Request({"sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.05; done"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  exec->Signal(SIGTERM);
  ExitStatus s = exec->Wait();
  EXPECT_EQ(s.exit_code, 7);
}

TEST_F(ContainerDriverTest, Pid1WithoutAHandlerIgnoresSigtermButNotSigkill) {
  auto exec = driver_->Start(Request({"sleep", "100"}));
  exec->Signal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string stat = ReadFile("/proc/" + std::to_string(exec->pid()) + "/stat");
  ASSERT_FALSE(stat.empty());
  EXPECT_EQ(stat.substr(stat.rfind(')') + 2, 1), "S") << "sleep should still be running";
  exec->Signal(SIGKILL);
  ExitStatus s = exec->Wait();
  EXPECT_EQ(s.signal, SIGKILL);
  exec->Signal(SIGKILL);  // after exit: does nothing
}

TEST_F(ContainerDriverTest, ExecFailureIsADriverError) {
  RunRequest req = Request({"no-such-command"});
  try {
    driver_->Start(req);
    FAIL() << "Start succeeded";
  } catch (const DriverError& e) {
    EXPECT_STREQ(e.what(), "exec \"no-such-command\": No such file or directory");
  }
}

TEST_F(ContainerDriverTest, MissingRootfsIsADriverErrorNamingIt) {
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

TEST_F(ContainerDriverTest, UnknownUserIsADriverError) {
  RunRequest req = Request({"true"});
  req.spec.user = "no-such-user";
  EXPECT_THROW(driver_->Start(req), DriverError);
}

TEST_F(ContainerDriverTest, JobsStartConcurrentlyFromSeveralThreads) {
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
}  // namespace pgfleet::hostd
