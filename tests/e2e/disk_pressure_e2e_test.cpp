// Disk pressure (host disk issue, item 3): a host whose data directory's
// filesystem is at or above --disk-full-percent says so in every heartbeat,
// shows it in pgfleet.host_status and `pgfleet hosts`, and gets no new jobs
// (they wait, saying why) while it keeps heartbeating and running what it has;
// freeing space clears it and the waiting jobs run. The data directory is a
// 16 MiB tmpfs of the test's own, filled and emptied by the test.

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class DiskPressureE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "mounting the test's tmpfs needs root (CI has it)";
    cluster_ = std::make_unique<Cluster>(db_);
    data_dir_ = cluster_->dir() + "/h1";
    ASSERT_EQ(0, mkdir(data_dir_.c_str(), 0755)) << strerror(errno);
    ASSERT_EQ(0, mount("tmpfs", data_dir_.c_str(), "tmpfs", 0, "size=16m,mode=0755"))
        << strerror(errno);
    mounted_ = true;
  }
  void TearDown() override {
    if (HasFailure() && cluster_) std::cerr << cluster_->Logs();
    if (cluster_) {
      for (auto& p : cluster_->processes()) p->Stop();
    }
    // Unmounted before the cluster's directory is removed.
    if (mounted_) umount2(data_dir_.c_str(), MNT_DETACH);
    cluster_.reset();
  }
  // Writes `mib` MiB of zeros to a file in the data directory.
  void Fill(const std::string& name, int mib) {
    std::ofstream out(data_dir_ + "/" + name, std::ios::binary | std::ios::trunc);
    std::string chunk(1 << 20, '\0');
    for (int i = 0; i < mib; ++i)
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    ASSERT_TRUE(out.good()) << "could not write " << mib << " MiB to the tmpfs";
  }
  std::string Condition() {
    return db_.Scalar("select coalesce(condition, '') from pgfleet.host_status where id = 'h1'");
  }
  std::string StateOf(const std::string& id) {
    return db_.Scalar("select state from pgfleet.jobs where id = " + id);
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  std::string data_dir_;
  bool mounted_ = false;
};

TEST_F(DiskPressureE2eTest, AFullDataDiskStopsNewJobsAndSaysWhyUntilSpaceIsFreed) {
  cluster_->StartScheduler("s1");
  cluster_->StartHost("h1", 4000, 4000, {"--disk-full-percent", "50"});
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();

  // Room on the disk: a job runs, and a job that will still be running when
  // the disk fills keeps running through it.
  std::string first =
      db_.Scalar("insert into pgfleet.jobs (command) values ('{true}') returning id");
  ASSERT_TRUE(WaitFor([&] { return StateOf(first) == "succeeded"; }, 30s)) << StateOf(first);
  EXPECT_EQ("", Condition());
  std::string sleeper =
      db_.Scalar("insert into pgfleet.jobs (command) values ('{sleep,6}') returning id");
  ASSERT_TRUE(WaitFor([&] { return StateOf(sleeper) == "running"; }, 30s)) << StateOf(sleeper);

  // 10 of 16 MiB: past 50%. The next heartbeat says so.
  ASSERT_NO_FATAL_FAILURE(Fill("filler", 10));
  ASSERT_TRUE(WaitFor([&] { return !Condition().empty(); }, 10s)) << cluster_->Logs();
  const std::string condition = Condition();
  EXPECT_EQ(0u, condition.find("disk pressure: data directory " + data_dir_ + " is ")) << condition;
  EXPECT_NE(std::string::npos, condition.find("% full (hostd --disk-full-percent 50)"))
      << condition;

  auto hosts = cluster_->Cli({"hosts"});
  ASSERT_EQ(0, hosts.exit_code) << hosts.err;
  EXPECT_NE(std::string::npos, hosts.out.find("up (disk pressure)")) << hosts.out;
  EXPECT_NE(std::string::npos, hosts.out.find(condition)) << hosts.out;

  // A new job waits, naming the host and its condition; the host keeps
  // heartbeating, and the job it already had runs to its end.
  std::string waiting =
      db_.Scalar("insert into pgfleet.jobs (command) values ('{true}') returning id");
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_.Scalar("select coalesce(error, '') from pgfleet.jobs where id = " + waiting)
                   .find("waiting for hosts to recover: host h1 has disk pressure") == 0;
      },
      10s))
      << db_.Scalar("select coalesce(error, '') from pgfleet.jobs where id = " + waiting);
  std::this_thread::sleep_for(2s);
  EXPECT_EQ("pending", StateOf(waiting));
  EXPECT_EQ("t", db_.Scalar("select alive from pgfleet.host_status where id = 'h1'"));
  ASSERT_TRUE(WaitFor([&] { return StateOf(sleeper) == "succeeded"; }, 30s)) << StateOf(sleeper);
  EXPECT_EQ("pending", StateOf(waiting));
  EXPECT_NE(std::string::npos, cluster_->Logs().find("disk pressure")) << "logged by hostd";

  // Space freed: the condition clears, and the waiting job runs.
  ASSERT_EQ(0, unlink((data_dir_ + "/filler").c_str())) << strerror(errno);
  ASSERT_TRUE(WaitFor([&] { return Condition().empty(); }, 10s)) << Condition();
  ASSERT_TRUE(WaitFor([&] { return StateOf(waiting) == "succeeded"; }, 30s)) << StateOf(waiting);
  EXPECT_EQ(
      1, db_.Count("select count(*) from pgfleet.job_events where kind = 'running' and job_id = " +
                   waiting));
}

TEST_F(DiskPressureE2eTest, AJobThatCannotStartForLackOfSpaceFailsClearlyAndTheHostGoesOn) {
  // The threshold at 100%: placement alone would stop at a full disk, so the
  // job is assigned by hand and the host's reconcile starts it on a disk with
  // no space left at all.
  cluster_->StartHost("h1", 4000, 4000, {"--disk-full-percent", "100"});
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  {
    std::ofstream out(data_dir_ + "/filler", std::ios::binary | std::ios::trunc);
    std::string chunk(1 << 16, '\0');
    while (out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()))) {
    }
  }
  std::string id = db_.Scalar(
      "insert into pgfleet.jobs (command, max_attempts) values ('{true}', 1) returning id");
  ASSERT_EQ("1", db_.Scalar("select count(*) from pgfleet.assign_jobs(jsonb_build_array("
                            "jsonb_build_object('job', " +
                            id + ", 'host', 'h1')))"));
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "failed"; },
      30s))
      << db_.Scalar("select state || ' ' || coalesce(error, '') from pgfleet.jobs where id = " + id)
      << cluster_->Logs();
  const std::string error = db_.Scalar("select error from pgfleet.jobs where id = " + id);
  EXPECT_NE(std::string::npos, error.find("No space left on device")) << error;
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_events where kind = 'running' and "
                         "job_id = " +
                         id));
  // The host goes on: it heartbeats, and says it is full.
  std::this_thread::sleep_for(2s);
  EXPECT_EQ("t", db_.Scalar("select alive from pgfleet.host_status where id = 'h1'"));
  EXPECT_EQ(0u, Condition().find("disk pressure")) << Condition();
  EXPECT_EQ("0", db_.Scalar("select cpu_allocated from pgfleet.hosts where id = 'h1'"));
}

TEST_F(DiskPressureE2eTest, BadDiskFullPercentIsRefusedNamingTheFlag) {
  for (const char* value : {"0", "101", "half"}) {
    auto r =
        testing::Run({BinaryPath("pgfleet-hostd"), "--db", db_.dsn(), "--id", "hx", "--token-file",
                      "/nonexistent", "--data-dir", data_dir_, "--disk-full-percent", value});
    EXPECT_EQ(2, r.exit_code) << value;
    EXPECT_NE(std::string::npos, r.err.find("--disk-full-percent")) << r.err;
  }
}

}  // namespace
}  // namespace pgfleet::testing
