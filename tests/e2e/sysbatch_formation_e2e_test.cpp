// Sysbatch formations end to end (kind = 'sysbatch', real daemons): the
// template runs once to completion on every eligible host and on a host
// that joins; once the formation is marked done, a host that joins gets
// none, while the scheduler, passing over that host, runs another sysbatch
// formation there; a job that never ran is cancelled when its host is
// removed.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

// "h1=1,h2=1" : per host, how many jobs of `formation` it has (any state),
// and of what, e.g. "h1=succeeded" when each host has one.
std::string PerHost(const TestDatabase& db, const std::string& formation) {
  return db.Scalar(
      "select coalesce(string_agg(h || '=' || s, ',' order by h), '') from ("
      " select pinned_host h, string_agg(state, '+' order by id) s from pgfleet.jobs"
      "  where formation = '" +
      formation + "' group by pinned_host) x");
}

// How many times anything of `formation` started running (job_events 'running').
long long Starts(const TestDatabase& db, const std::string& formation) {
  return db.Count(
      "select count(*) from pgfleet.job_events e join pgfleet.jobs j on j.id = e.job_id"
      " where j.formation = '" +
      formation + "' and e.kind = 'running'");
}

TEST(SysbatchFormationTest, RunsOnceOnEachOf3HostsAndOnceOnA4thThatJoinsThenNoneOnA5thOnceDone) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  for (const char* h : {"h1", "h2", "h3"}) cluster.StartHost(h, 1000, 1000);
  ASSERT_TRUE(cluster.WaitHostsUp(3)) << cluster.Logs();
  auto r = cluster.Cli(
      {"formation", "create", "upgrade", "--kind", "sysbatch", "--cpu", "100", "--", "true"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  const std::string ran3 = "h1=succeeded,h2=succeeded,h3=succeeded";
  ASSERT_TRUE(WaitFor([&] { return PerHost(db, "upgrade") == ran3; }, 30s))
      << PerHost(db, "upgrade") << cluster.Logs();
  EXPECT_EQ(3, Starts(db, "upgrade"));
  EXPECT_EQ("3", db.Scalar("select desired from pgfleet.formation_status where name = 'upgrade'"));
  EXPECT_EQ("3",
            db.Scalar("select succeeded from pgfleet.formation_status where name = 'upgrade'"));

  cluster.StartHost("h4", 1000, 1000);
  const std::string ran4 = ran3 + ",h4=succeeded";
  ASSERT_TRUE(WaitFor([&] { return PerHost(db, "upgrade") == ran4; }, 30s))
      << PerHost(db, "upgrade") << cluster.Logs();
  EXPECT_EQ(4, Starts(db, "upgrade")) << "no host ran it twice";

  r = cluster.Cli({"formation", "done", "upgrade"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  EXPECT_NE(std::string::npos, r.out.find("upgrade done since")) << r.out;
  r = cluster.Cli({"formation", "list"});
  EXPECT_NE(std::string::npos, r.out.find("sysbatch (done)")) << r.out;
  // A witness: a sysbatch formation not done, already run on h1-h4.
  r = cluster.Cli(
      {"formation", "create", "witness", "--kind", "sysbatch", "--cpu", "100", "--", "true"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  ASSERT_TRUE(WaitFor([&] { return PerHost(db, "witness") == ran4; }, 30s))
      << PerHost(db, "witness") << cluster.Logs();

  // h5 joins: the witness running there proves the scheduler passed over
  // h5 after it joined; the done formation gave it nothing.
  cluster.StartHost("h5", 1000, 1000);
  ASSERT_TRUE(WaitFor([&] { return PerHost(db, "witness") == ran4 + ",h5=succeeded"; }, 30s))
      << PerHost(db, "witness") << cluster.Logs();
  EXPECT_EQ(ran4, PerHost(db, "upgrade"));
  EXPECT_EQ(4, Starts(db, "upgrade"));
  EXPECT_EQ("4", db.Scalar("select desired from pgfleet.formation_status where name = 'upgrade'"))
      << "done: the hosts it ran on";
}

TEST(SysbatchFormationTest, AJobThatNeverRanIsCancelledWhenItsHostIsRemoved) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 2000, 1000);
  Process& h2 = cluster.StartHost("h2", 1000, 1000);
  ASSERT_TRUE(cluster.WaitHostsUp(2)) << cluster.Logs();
  // 1500m: h1 runs it, h2 (1000m) never can: its job waits, pending.
  auto r = cluster.Cli(
      {"formation", "create", "upgrade", "--kind", "sysbatch", "--cpu", "1500", "--", "true"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  ASSERT_TRUE(WaitFor([&] { return PerHost(db, "upgrade") == "h1=succeeded,h2=pending"; }, 30s))
      << PerHost(db, "upgrade") << cluster.Logs();

  h2.Stop();
  ASSERT_EQ(0, cluster.Cli({"host", "offline", "h2"}).exit_code);
  r = cluster.Cli({"host", "remove", "h2"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  ASSERT_TRUE(WaitFor([&] { return PerHost(db, "upgrade") == "h1=succeeded,h2=cancelled"; }, 30s))
      << PerHost(db, "upgrade") << cluster.Logs();
  EXPECT_EQ(1, db.Count("select count(*) from pgfleet.job_events where kind = 'cancelled'"
                        " and detail = 'sysbatch formation upgrade: host h2 was removed before"
                        " the job ran'"));
  EXPECT_EQ(1, Starts(db, "upgrade"));
}

TEST(SysbatchFormationTest, TheCliRefusesASysbatchWithoutACommandAndDoneOnAnotherKind) {
  TestDatabase db;
  Cluster cluster(db);
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"formation", "create", "x", "--kind", "sysbatch"}, "a sysbatch formation needs a command"},
      {{"formation", "create", "x", "--kind", "once", "--", "true"},
       "--kind must be service, batch, system, sysbatch or cron"},
      {{"formation", "done", "default"}, "only a sysbatch formation can be marked done"},
      {{"formation", "done", "nope"}, "no formation named nope"},
  };
  for (const auto& [args, message] : refused) {
    auto r = cluster.Cli(args);
    EXPECT_NE(0, r.exit_code) << args[1];
    EXPECT_NE(std::string::npos, r.err.find(message)) << r.err;
  }
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.formations where name = 'x'"));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.formations where done_at is not null"));
}

}  // namespace
}  // namespace pgfleet::testing
