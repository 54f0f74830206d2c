#pragma once
// The fixture of the container driver's end-to-end tests: PostgreSQL (scripts/test),
// pgfleet-schedulerd, pgfleet-hostd --driver container and the pgfleet CLI. Jobs
// run in a busybox rootfs built by scripts/make-rootfs into a temporary
// directory and named with `--rootfs DIR`. Every outcome is read back from
// pgfleet.jobs, the way an operator would see it.
//
// Needs root and the memory, cpu, cpuacct and pids cgroup controllers (CI has
// both); without them every test FAILS with the reason, it never skips. Each
// test has its own database, cluster and host ids, so the job cgroups
// (pgfleet/<host>/<job>-<attempt>) of two tests never meet, also under ctest -j.

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/util/text.h"
#include "hostd/drivers/container/cgroup.h"
#include "hostd/drivers/container/container.h"
#include "test_support.h"

namespace pgfleet::testing::container_e2e {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

inline std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

inline bool IsDir(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A busybox rootfs (scripts/make-rootfs) in a new temporary directory
// (*parent): its path in *rootfs; "" or why it could not be built.
inline std::string MakeBusyboxRootfs(std::unique_ptr<TempDir>* parent, std::string* rootfs) {
  *parent = std::make_unique<TempDir>();
  *rootfs = (*parent)->path() + "/busybox";
  CommandResult r =
      pgfleet::testing::Run({SourcePath("scripts/make-rootfs"), "busybox", *rootfs}, {}, 120s);
  return r.exit_code == 0 ? "" : "scripts/make-rootfs failed: " + r.out + r.err;
}

class ContainerE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { rootfs_error_ = MakeBusyboxRootfs(&rootfs_parent_, &rootfs_); }
  static void TearDownTestSuite() { rootfs_parent_.reset(); }

  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "the container e2e tests must run as root (CI does); run them "
                                "with sudo";
    std::string why;
    ASSERT_TRUE(hostd::ContainerDriverAvailable(&why))
        << "container driver unavailable on this machine: " << why;
    ASSERT_TRUE(rootfs_error_.empty()) << rootfs_error_;
    cluster_ = std::make_unique<Cluster>(db_);
    cluster_->StartScheduler("s1");
    host_ = NewHostId("c");
    container_hosts_.push_back(host_);
    cluster_->StartHost(host_, 4000, 4000, {"--driver", "container", "--usage-interval", "1s"});
    ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
    ASSERT_EQ("container",
              db_.Scalar("select driver from pgfleet.hosts where id = '" + host_ + "'"))
        << cluster_->Logs();
  }

  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs();
    // Stopping hostd leaves running jobs running (by design): clean up first.
    for (const auto& h : container_hosts_) KillJobsOf(h);
    cluster_.reset();
    // Job cgroups are checked by the tests; the per-host parent outlives
    // hostd (its shims share it), so remove it once it is empty.
    for (const auto& h : container_hosts_) {
      for (const auto& dir : HostCgroupDirs(h)) rmdir(dir.c_str());
    }
  }

  // A host id no other test (or repetition, or process) uses.
  static std::string NewHostId(const std::string& kind) {
    static int n = 0;
    return "e2e-" + kind + "-" + std::to_string(getpid()) + "-" + std::to_string(++n);
  }

  // pgfleet/<scope>/<host> in every controller the driver uses; on this
  // cgroup v1 CI machine: /sys/fs/cgroup/{memory,cpu,cpuacct,pids}/pgfleet/<scope>/<host>.
  static std::vector<std::string> HostCgroupDirs(const std::string& host) {
    return pgfleet::testing::HostCgroupDirs(host);
  }

  // Every test waits for its jobs to finish, so a job cgroup still there is a
  // leak (or a test that failed half-way): report it, kill what runs in it and
  // remove it, so the next test or run starts clean.
  static void KillJobsOf(const std::string& host) {
    for (const auto& dir : HostCgroupDirs(host)) {
      for (const auto& job : Subdirs(dir)) {
        ADD_FAILURE() << "job cgroup " << dir << "/" << job << " is left";
        std::string procs;
        try {
          procs = util::ReadFile(dir + "/" + job + "/cgroup.procs");
        } catch (const std::exception&) {
          continue;  // deleted meanwhile
        }
        for (const auto& pid : Lines(procs)) kill(std::stoi(pid), SIGKILL);
      }
    }
    for (const auto& dir : HostCgroupDirs(host)) {
      for (const auto& job : Subdirs(dir)) {
        WaitFor([&] { return rmdir((dir + "/" + job).c_str()) == 0; }, 5s);
      }
    }
  }

  // Submits with the CLI; returns the job id.
  std::string Submit(std::vector<std::string> args) {
    args.insert(args.begin(), "run");
    CommandResult r = cluster_->Cli(args, 30s);
    EXPECT_EQ(0, r.exit_code) << r.out << r.err;
    return util::Trim(r.out);
  }

  std::string Job(const std::string& id, const std::string& column) {
    return db_.Scalar("select " + column + " from pgfleet.jobs where id = " + id);
  }

  bool WaitState(const std::string& id, const std::string& state,
                 std::chrono::milliseconds timeout = 30s) {
    return WaitFor([&] { return Job(id, "state") == state; }, timeout);
  }

  bool WaitFinished(const std::string& id, std::chrono::milliseconds timeout = 30s) {
    return WaitFor(
        [&] {
          std::string s = Job(id, "state");
          return s == "succeeded" || s == "failed" || s == "cancelled";
        },
        timeout);
  }

  std::string JobsByState() {
    return db_.Scalar(
        "select string_agg(id || ':' || state || ':' || coalesce(error, ''), ', ' order by id)"
        "  from pgfleet.jobs");
  }

  static inline std::unique_ptr<TempDir> rootfs_parent_;
  static inline std::string rootfs_;
  static inline std::string rootfs_error_;

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  std::string host_;                          // the container host every test has
  std::vector<std::string> container_hosts_;  // container hosts whose cgroups are checked
};

}  // namespace pgfleet::testing::container_e2e
