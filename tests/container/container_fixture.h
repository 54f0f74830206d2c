#pragma once
// Shared by the container driver tests: the fixture that runs one job through
// the container driver against the real kernel: namespaces, pivot_root,
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

#include "hostd/drivers/container/cgroup.h"
#include "hostd/drivers/container/container.h"
#include "test_support.h"

namespace pgfleet::hostd::testing_container {

using pgfleet::testing::Subdirs;

using Clock = std::chrono::steady_clock;

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

inline std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = s.find_first_not_of(" \t");
  return i == std::string::npos ? std::string() : s.substr(i);
}

inline size_t OpenFds() {
  size_t n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (d && readdir(d)) ++n;
  if (d) closedir(d);
  return n;
}

inline std::set<std::string> MountTable() {
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

inline int RunShell(const std::string& cmd) { return std::system(cmd.c_str()); }

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
    r.attempt_dir = root_ + "/jobs/" + name;
    mkdir(r.attempt_dir.c_str(), 0700);
    r.job_dir = r.attempt_dir + "/work";
    mkdir(r.job_dir.c_str(), 0700);
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
    return HostCgroupPath(host_) + "/" + std::to_string(r.job_id) + "-" + std::to_string(r.attempt);
  }

  const CgroupSystem& Cgroups() const { return *CgroupSystem::Get(nullptr); }

  // No job cgroup of this test process is left in any controller.
  void ExpectNoJobCgroups() const {
    const CgroupSystem* sys = CgroupSystem::Get(nullptr);
    if (!sys) return;
    for (const auto& c : sys->controllers()) {
      auto left = Subdirs(sys->Dir(c, HostCgroupPath(host_)));
      EXPECT_TRUE(left.empty()) << left.size() << " job cgroup(s) left in " << c << ", e.g. "
                                << left.front();
    }
  }

  static inline std::string root_, data_dir_, host_;
  static inline bool rootfs_built_ = false;
  static inline std::atomic<int64_t> next_job_{4200};
  std::unique_ptr<Driver> driver_;
};

}  // namespace pgfleet::hostd::testing_container
