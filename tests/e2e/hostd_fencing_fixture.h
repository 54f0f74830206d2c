#pragma once
// What the hostd fencing tests (hostd_fencing_*_test.cpp) share: the
// HostdFencingTest fixture, which makes the test a child subreaper (killed
// jobs and shims that outlive hostd are reparented to it and reaped at the
// end) and reads a running job's processes, and a job whose shell starts a
// child in its process group, so that a kill must take both.
// Each test builds its own cluster: on the shared PostgreSQL (db_ alone) or
// on a PrivatePostgres of its own (pg_) when it stops the database.

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "hostd/attempt/attempt_dir.h"
#include "orphans.h"
#include "test_support.h"

namespace pgfleet::testing::fencing {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A job with a child in its process group: both must die when it is killed.
inline const char* const kJobWithChild = "sleep 600 & echo $! > child.pid; wait";

// The same process as when first seen, and not a zombie (orphans.h).
inline bool Alive(pid_t pid, int64_t start_time) { return SameProcessAlive(pid, start_time); }

// The running job's main process and the child it started, as seen now.
struct JobProcs {
  pid_t pid = 0, child = 0;
  int64_t pid_start = -1, child_start = -1;
  bool AnyAlive() const { return Alive(pid, pid_start) || Alive(child, child_start); }
};

class HostdFencingBase : public ::testing::Test {
 protected:
  void SetUp() override { prctl(PR_SET_CHILD_SUBREAPER, 1); }
  void TearDown() override {
    if (HasFailure() && cluster_) std::cerr << cluster_->Logs();
    cluster_.reset();
    db_.reset();
    pg_.reset();
    ReapOrphans(3s);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
  }
  std::string Job(const std::string& id, const std::string& column) {
    return db_->Scalar("select " + column + " from pgfleet.jobs where id = " + id);
  }
  long long Generation(const std::string& host) {
    return db_->Count("select generation from pgfleet.hosts where id = '" + host + "'");
  }
  // Waits for the job to run and for the child its shell wrote down.
  JobProcs Running(const std::string& id, const std::string& host, int attempt) {
    JobProcs p;
    EXPECT_TRUE(WaitFor(
        [&] {
          return Job(id, "state") == "running" && Job(id, "attempt") == std::to_string(attempt);
        },
        30s))
        << Job(id, "state") << "\n"
        << cluster_->Logs();
    p.pid = std::stoi(Job(id, "pid"));
    p.pid_start = hostd::attempt::ProcStartTime(p.pid);
    std::string file = cluster_->dir() + "/" + host + "/jobs/" + id + "-" +
                       std::to_string(attempt) + "/work/child.pid";
    EXPECT_TRUE(WaitFor(
        [&] {
          std::ifstream f(file);
          return static_cast<bool>(f >> p.child);
        },
        10s))
        << file;
    p.child_start = hostd::attempt::ProcStartTime(p.child);
    EXPECT_TRUE(Alive(p.pid, p.pid_start));
    EXPECT_TRUE(Alive(p.child, p.child_start));
    return p;
  }

  std::unique_ptr<PrivatePostgres> pg_;
  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<Cluster> cluster_;
};

class HostdFencingTest : public HostdFencingBase {};

}  // namespace pgfleet::testing::fencing
