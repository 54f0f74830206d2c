// Live usage (host disk and insight issue, item 4), process driver: hostd
// measures each running job's process group in /proc every --usage-interval
// and sends it with a heartbeat; pgfleet.visible_jobs, pgfleet.host_status,
// `pgfleet ps`, `pgfleet inspect` and `pgfleet hosts` show it beside what the
// job asked for; a job that ends shows none, and its reading is dropped.

#include <gtest/gtest.h>

#include <string>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class UsageE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(db_);
    cluster_->StartScheduler("s1");
    cluster_->StartHost("h1", 4000, 4000, {"--usage-interval", "1s"});
    ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs();
    cluster_.reset();
  }
  std::string Submit(const std::string& command) {
    return db_.Scalar("insert into pgfleet.jobs (command, cpu, memory) values ('" + command +
                      "', 500, 64) returning id");
  }
  std::string State(const std::string& id) {
    return db_.Scalar("select state from pgfleet.jobs where id = " + id);
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(UsageE2eTest, ABusyJobShowsItsCpuAndMemoryInUseAndAnIdleOneAlmostNone) {
  // Busy in a child of a shell, so the whole process group is what counts.
  std::string busy = Submit("{sh,-c,sha256sum /dev/zero; true}");
  std::string idle = Submit("{sleep,60}");
  ASSERT_TRUE(WaitFor([&] { return State(busy) == "running" && State(idle) == "running"; }, 30s));
  auto used = [&](const std::string& id) {
    return std::stod(
        db_.Scalar("select coalesce(cpu_used, -1) from pgfleet.visible_jobs where id = " + id));
  };
  ASSERT_TRUE(WaitFor([&] { return used(busy) > 0.5 && used(idle) >= 0; }, 15s))
      << "busy " << used(busy) << " idle " << used(idle);
  EXPECT_LT(used(idle), 0.2);
  EXPECT_EQ(
      "t", db_.Scalar("select memory_used_bytes > 0 from pgfleet.visible_jobs where id = " + busy));
  EXPECT_EQ("t",
            db_.Scalar("select cpu_used > 0.5 and memory_used_bytes > 0 and cpu_allocated = 1000"
                       "  from pgfleet.host_status where id = 'h1'"));

  // The CLI shows it beside what was asked for.
  CommandResult ps = cluster_->Cli({"ps"});
  ASSERT_EQ(0, ps.exit_code) << ps.err;
  EXPECT_NE(std::string::npos, ps.out.find("CPU USED")) << ps.out;
  EXPECT_NE(std::string::npos, ps.out.find("Mi ")) << ps.out;
  CommandResult inspect = cluster_->Cli({"inspect", busy});
  ASSERT_EQ(0, inspect.exit_code) << inspect.err;
  EXPECT_NE(std::string::npos, inspect.out.find("in use: ")) << inspect.out;
  EXPECT_NE(std::string::npos, inspect.out.find("(asked 500m)")) << inspect.out;
  CommandResult hosts = cluster_->Cli({"hosts"});
  ASSERT_EQ(0, hosts.exit_code) << hosts.err;
  EXPECT_NE(std::string::npos, hosts.out.find("MEM USED")) << hosts.out;

  // Stopped: no usage shown, and the next reading drops its row.
  CommandResult stop = cluster_->Cli({"stop", busy});
  ASSERT_EQ(0, stop.exit_code) << stop.out << stop.err;
  ASSERT_TRUE(WaitFor([&] { return State(busy) == "cancelled"; }, 30s)) << State(busy);
  EXPECT_EQ(-1, used(busy));
  EXPECT_TRUE(WaitFor(
      [&] {
        return db_.Count("select count(*) from pgfleet.job_usage where job_id = " + busy) == 0;
      },
      10s));
  EXPECT_GE(used(idle), 0) << "the job still running keeps its reading";
  ASSERT_EQ(0, cluster_->Cli({"stop", idle}).exit_code);
  EXPECT_TRUE(WaitFor([&] { return State(idle) == "cancelled"; }, 30s)) << State(idle);
}

TEST(UsageFlags, ABadUsageIntervalIsRefusedNamingTheFlagAndTheRule) {
  TestDatabase db;
  TempDir dir;
  for (const char* value : {"0", "0.5s", "2h", "soon"}) {
    auto r =
        testing::Run({BinaryPath("pgfleet-hostd"), "--db", db.dsn(), "--id", "hx", "--token-file",
                      "/nonexistent", "--data-dir", dir.path(), "--usage-interval", value});
    EXPECT_EQ(2, r.exit_code) << value << ": " << r.err;
    EXPECT_NE(std::string::npos, r.err.find("--usage-interval")) << value << ": " << r.err;
  }
}

}  // namespace
}  // namespace pgfleet::testing
