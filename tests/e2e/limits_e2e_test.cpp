// Limits end to end (issue 38) with real daemons: three schedulers and
// hollow hosts. A formation's max_running holds through a 100-job burst,
// sampled every 50 ms throughout; an owner at quota waits with the reason
// in jobs.error and runs once room frees.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class LimitsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_.Scalar("update pgfleet.settings set value = '3' where name = 'host_ttl_seconds'");
    for (const char* id : {"s1", "s2", "s3"}) cluster_.StartScheduler(id, {"--host-ttl", "3"});
    cluster_.StartHollowHosts("h", 2, {"--cpu", "100000", "--memory", "100000"});
    ASSERT_TRUE(cluster_.WaitHostsUp(2, 30s));
  }
  void TearDown() override {
    if (HasFailure()) std::cout << cluster_.Logs();
  }

  TestDatabase db_;
  Cluster cluster_{db_};
};

TEST_F(LimitsE2eTest, MaxRunningTwoHoldsThroughAHundredJobBurstSampledEvery50ms) {
  auto r = cluster_.Cli({"formation", "create", "lim", "--max-running", "2"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  EXPECT_EQ("2", db_.Scalar("select max_running from pgfleet.formations where name = 'lim'"));

  std::atomic<bool> stop{false};
  std::atomic<long long> most{0}, samples{0};
  std::thread sampler([&] {
    auto conn = db_.Connect();
    while (!stop) {
      pqxx::nontransaction tx(*conn);
      long long n = tx.exec1(
                          "select count(*) from pgfleet.jobs where formation = 'lim'"
                          " and state in ('assigned', 'running')")[0]
                        .as<long long>();
      most = std::max(most.load(), n);
      ++samples;
      std::this_thread::sleep_for(50ms);
    }
  });
  db_.Scalar(
      "insert into pgfleet.jobs (formation, command, cpu, memory, env)"
      " select 'lim', '{true}', 100, 64, '{\"PGFLEET_SIM_SECONDS\": \"0.05\"}'"
      "   from generate_series(1, 100)");
  bool done = WaitFor(
      [&] {
        return db_.Count(
                   "select count(*) from pgfleet.jobs where formation = 'lim'"
                   " and state = 'succeeded'") == 100;
      },
      180s);
  stop = true;
  sampler.join();
  EXPECT_TRUE(done) << db_.Scalar(
      "select string_agg(state || '=' || n, ' ') from (select state, count(*) n"
      " from pgfleet.jobs where formation = 'lim' group by state) x");
  EXPECT_LE(most.load(), 2) << "over " << samples.load() << " samples";
  EXPECT_GE(most.load(), 1);
  EXPECT_GT(samples.load(), 10);
}

TEST_F(LimitsE2eTest, AnOwnerAtQuotaWaitsWithTheReasonAndRunsWhenRoomFrees) {
  const std::string alice = db_.CreateLogin("alice", {"pgfleet_submitter"});
  db_.Scalar("insert into pgfleet.owner_quotas (owner, max_running) values ('" + alice + "', 1)");
  auto first = cluster_.CliAs(db_.DsnAs(alice),
                              {"run", "--env", "PGFLEET_SIM_SECONDS=1000", "--", "sleep", "1000"});
  ASSERT_EQ(0, first.exit_code) << first.out << first.err;
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Count("select count(*) from pgfleet.jobs where state = 'running'") == 1; },
      30s));
  auto second = cluster_.CliAs(db_.DsnAs(alice), {"run", "--", "true"});
  ASSERT_EQ(0, second.exit_code) << second.out << second.err;
  const std::string waiting =
      "select coalesce(error, '') from pgfleet.jobs where state = 'pending'";
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Scalar(waiting) == "owner " + alice + " at quota: running 1 of 1 jobs"; },
      30s))
      << db_.Scalar(waiting);
  // Room frees: the first ends, the second runs to the end.
  db_.Scalar("select pgfleet.cancel(id) from pgfleet.jobs where state = 'running'");
  EXPECT_TRUE(WaitFor(
      [&] { return db_.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == 1; },
      30s))
      << db_.Scalar("select string_agg(id || ':' || state, ' ') from pgfleet.jobs");
  EXPECT_EQ("0", db_.Scalar("select running from pgfleet.owner_quota_status"));
}

}  // namespace
}  // namespace pgfleet::testing
