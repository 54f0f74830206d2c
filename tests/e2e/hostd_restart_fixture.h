#pragma once
// What the hostd restart tests (hostd_restart_*_test.cpp) share: the
// HostdRestartTest fixture, parameterized by driver ("process" or
// "container"; hostd_restart_reattach_test.cpp instantiates the suite for
// both), with a scheduler and one host named per test process on real
// daemons and PostgreSQL. The test is a child subreaper: shims and the jobs
// of killed shims outlive hostd, are reparented to it and reaped at the end;
// a container host's cgroups are removed then too.

#include <dirent.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/net/http.h"
#include "hostd/attempt/attempt_dir.h"
#include "hostd/drivers/container/cgroup.h"
#include "hostd/drivers/container/container.h"
#include "orphans.h"
#include "test_support.h"

namespace pgfleet::testing::restart {

using namespace std::chrono_literals;

inline std::string Cmdline(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (char& c : s) c = c == '\0' ? ' ' : c;
  return s;
}

// The same process as when first seen (pid and start time both match), and
// not a zombie (orphans.h).
inline bool SameProcess(pid_t pid, int64_t start_time) { return SameProcessAlive(pid, start_time); }

class HostdRestartTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (driver() == "container") {
      ASSERT_EQ(geteuid(), 0u) << "the container driver needs root (CI has it)";
    }
    // Unique per process: container cgroups (pgfleet/<host>/<job>-<attempt>)
    // of tests running side by side must never meet.
    host_ = "hr" + std::to_string(getpid());
    cluster_ = std::make_unique<Cluster>(db_);
    cluster_->StartScheduler("s1");
    StartHost();
    ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs() << ShimLog();
    cluster_.reset();  // kills the jobs the database knows, stops the daemons
    ReapOrphans(3s);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    if (driver() == "container") RemoveHostCgroups();
  }
  // The per-host cgroup parent outlives a killed hostd (and one stopped while
  // its last job's shim was still tidying up), and a job whose shim was
  // killed leaves its (empty) cgroup: remove them.
  void RemoveHostCgroups() {
    for (const std::string& dir : HostCgroupDirs(host_)) {
      WaitFor(
          [&] {
            if (DIR* d = opendir(dir.c_str())) {
              while (dirent* e = readdir(d)) {
                std::string n = e->d_name;
                if (e->d_type == DT_DIR && n != "." && n != "..") rmdir((dir + "/" + n).c_str());
              }
              closedir(d);
            }
            return rmdir(dir.c_str()) == 0 || errno == ENOENT;
          },
          2s);
    }
  }

  // Directories of the cgroup at `path` under pgfleet/<host>/ ("" for the
  // per-host group itself), in every controller the container driver uses,
  // that exist now.
  std::vector<std::string> CgroupDirs(const std::string& path) const {
    std::vector<std::string> out;
    const hostd::CgroupSystem* sys = hostd::CgroupSystem::Get(nullptr);
    if (!sys) return out;
    for (const auto& c : sys->controllers()) {
      std::string dir = sys->Dir(
          c, hostd::HostCgroupPathFor(DataDir(), host_) + (path.empty() ? "" : "/" + path));
      struct stat st;
      if (stat(dir.c_str(), &st) == 0) out.push_back(dir);
    }
    return out;
  }
  static std::string Join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += s + " ";
    return out;
  }

  const std::string& driver() const { return GetParam(); }
  Process& StartHost() {
    host_proc_ = &cluster_->StartHost(host_, 4000, 4000, {"--driver", driver()});
    return *host_proc_;
  }
  std::string DataDir() const { return cluster_->dir() + "/" + host_; }
  std::string ShimLog() const {
    std::ifstream f(DataDir() + "/shim.log");
    return "---- shim.log\n" +
           std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  long long Generation() {
    return db_.Count("select coalesce((select generation from pgfleet.hosts where id = '" + host_ +
                     "'), 0)");
  }
  std::string Job(const std::string& id, const std::string& column) {
    return db_.Scalar("select " + column + " from pgfleet.jobs where id = " + id);
  }
  // The job as hostd's API reports it (after a restart: what it re-attached to).
  nlohmann::json ApiJob(const std::string& id) {
    httplib::Client c(db_.Scalar("select api_url from pgfleet.hosts where id = '" + host_ + "'"));
    c.set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
    auto res = c.Get(("/v1/jobs/" + id).c_str());
    if (!res || res->status != 200) return nullptr;
    return nlohmann::json::parse(res->body, nullptr, false);
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  std::string host_;
  Process* host_proc_ = nullptr;
};

}  // namespace pgfleet::testing::restart
