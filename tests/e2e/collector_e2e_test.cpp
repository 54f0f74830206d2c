// Finished attempts collected on the host (host disk issue, item 2): their
// directories go --gc-after after they ended, or sooner when the data
// directory's filesystem is fuller than --gc-disk-percent; the database still
// explains the job, `pgfleet logs` says when its log was collected, and a
// late dispatch of a collected attempt does not run it again.

#include <gtest/gtest.h>
#include <httplib.h>

#include "core/net/http.h"
#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class CollectorE2eTest : public ::testing::Test {
 protected:
  void StartCluster(std::vector<std::string> host_flags) {
    cluster_ = std::make_unique<Cluster>(db_);
    cluster_->StartScheduler("s1");
    host_ = &cluster_->StartHost("h1", 8000, 8000, std::move(host_flags));
    ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  }
  void TearDown() override {
    if (HasFailure() && cluster_) std::cerr << cluster_->Logs();
  }
  // Runs n jobs printing their number; waits until all succeeded.
  void RunJobs(int n) {
    db_.Scalar(
        "insert into pgfleet.jobs (command, cpu, memory) select array['sh', '-c', 'echo job ' || "
        "g], 10, 10 from generate_series(1, " +
        std::to_string(n) + ") g");
    ASSERT_TRUE(WaitFor(
        [&] {
          return db_.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == n;
        },
        120s))
        << db_.Scalar(
               "select string_agg(state || ':' || n, ', ') from (select state, count(*) n"
               " from pgfleet.jobs group by 1) x");
  }
  size_t AttemptDirs() { return Subdirs(cluster_->dir() + "/h1/jobs").size(); }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  Process* host_ = nullptr;
};

TEST_F(CollectorE2eTest, FinishedAttemptsAreCollectedAfterGcAfterAndStillExplained) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({"--gc-after", "2s"}));
  ASSERT_NO_FATAL_FAILURE(RunJobs(500));
  ASSERT_TRUE(WaitFor([&] { return AttemptDirs() == 0; }, 30s))
      << AttemptDirs() << " attempt directories left";
  std::string collected = util::ReadFile(cluster_->dir() + "/h1/collected.jsonl");
  EXPECT_EQ(500, std::count(collected.begin(), collected.end(), '\n'));

  std::string id = db_.Scalar("select min(id) from pgfleet.jobs");
  // The database still explains the job.
  auto inspect = cluster_->Cli({"inspect", id});
  ASSERT_EQ(0, inspect.exit_code) << inspect.err;
  EXPECT_NE(std::string::npos, inspect.out.find("state: succeeded")) << inspect.out;
  EXPECT_NE(std::string::npos, inspect.out.find("exit_code: 0")) << inspect.out;
  EXPECT_NE(std::string::npos, inspect.out.find("job 1\n")) << inspect.out;
  // Its log says it was collected, then shows the database's tail.
  auto logs = cluster_->Cli({"logs", id});
  EXPECT_EQ(0, logs.exit_code) << logs.err;
  EXPECT_NE(std::string::npos,
            logs.err.find("the log of job " + id + " attempt 1 was collected at"))
      << logs.err;
  EXPECT_EQ("job 1\n", logs.out);

  // A late dispatch of a collected attempt does not run it again.
  auto dispatch_again = [&] {
    httplib::Client c(db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
    c.set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
    // With a valid ticket (a new one each time: a ticket is taken once).
    auto res = c.Post("/v1/jobs",
                      SignDispatch(db_, "h1",
                                   R"({"jobs":[{"job":)" + id +
                                       R"(,"attempt":1,"spec":{"command":["sh","-c","echo again"],)"
                                       R"("privileged":true}}]})"),
                      "application/json");
    return res ? res->body : std::string("no answer");
  };
  // Remembered in memory ...
  EXPECT_NE(std::string::npos, dispatch_again().find("\"already\"")) << "first try";
  // ... and, after a restart, from collected.jsonl.
  const std::string old_url = db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'");
  host_->Stop();
  host_ = &cluster_->StartHost("h1", 8000, 8000, {"--gc-after", "2s"});
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'") != old_url; },
      20s))
      << host_->Log();
  EXPECT_NE(std::string::npos, dispatch_again().find("\"previous_life\"")) << "after restart";
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(0u, AttemptDirs());
  EXPECT_EQ(1, db_.Count("select count(*) from pgfleet.job_events where kind = 'running' and "
                         "job_id = " +
                         id));
  EXPECT_EQ("succeeded", db_.Scalar("select state from pgfleet.jobs where id = " + id));
}

TEST_F(CollectorE2eTest, AFullDiskCollectsFinishedAttemptsEarlyOldestFirst) {
  // Every real filesystem is more than 1% full: the threshold is passed at once.
  ASSERT_NO_FATAL_FAILURE(StartCluster({"--gc-after", "24h", "--gc-disk-percent", "1"}));
  ASSERT_NO_FATAL_FAILURE(RunJobs(20));
  ASSERT_TRUE(WaitFor([&] { return AttemptDirs() == 0; }, 30s))
      << AttemptDirs() << " attempt directories left";
  EXPECT_NE(std::string::npos, host_->Log().find("over 1% full")) << host_->Log();
}

TEST_F(CollectorE2eTest, BadGcFlagsAreRefusedNamingTheFlag) {
  TempDir dir;
  for (auto [flag, value, message] :
       {std::tuple{"--gc-after", "soon", "--gc-after"},
        std::tuple{"--gc-disk-percent", "0", "--gc-disk-percent must be between 1 and 100"},
        std::tuple{"--gc-disk-percent", "101", "--gc-disk-percent must be between 1 and 100"}}) {
    auto r = testing::Run({BinaryPath("pgfleet-hostd"), "--db", db_.dsn(), "--id", "hx",
                           "--token-file", "/nonexistent", "--data-dir", dir.path(), flag, value});
    EXPECT_EQ(2, r.exit_code) << flag << " " << value;
    EXPECT_NE(std::string::npos, r.err.find(message)) << r.err;
  }
}

}  // namespace
}  // namespace pgfleet::testing
