// System formations end to end (kind = 'system'): one replica on every
// eligible host, one more when a host joins, none on a host that drains.

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

TEST(SystemFormationTest, OneReplicaPerHostFollowsHostsJoiningAndDraining) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  for (const char* h : {"h1", "h2", "h3"}) cluster.StartHost(h, 1000, 1000);
  ASSERT_TRUE(cluster.WaitHostsUp(3)) << cluster.Logs();
  auto r = cluster.Cli({"formation", "create", "agent", "--kind", "system", "--cpu", "100", "--",
                        "sleep", "300"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  const std::string per_host =
      "select coalesce(string_agg(host_id || '=' || n, ',' order by host_id), '') from ("
      " select host_id, count(*) n from pgfleet.jobs where formation = 'agent'"
      "   and state = 'running' and desired_state = 'run' group by host_id) x";
  ASSERT_TRUE(WaitFor([&] { return db.Scalar(per_host) == "h1=1,h2=1,h3=1"; }, 30s))
      << db.Scalar(per_host) << cluster.Logs();
  EXPECT_EQ("3", db.Scalar("select desired from pgfleet.formation_status where name = 'agent'"));

  cluster.StartHost("h4", 1000, 1000);
  ASSERT_TRUE(WaitFor([&] { return db.Scalar(per_host) == "h1=1,h2=1,h3=1,h4=1"; }, 30s))
      << db.Scalar(per_host);

  ASSERT_EQ(0, cluster.Cli({"drain", "h2"}).exit_code);
  ASSERT_TRUE(WaitFor([&] { return db.Scalar(per_host) == "h1=1,h3=1,h4=1"; }, 30s))
      << db.Scalar(per_host);
  // Stopped, not only asked to stop (the exit report follows the request).
  EXPECT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.jobs where formation = 'agent'"
                   " and host_id = 'h2' and state in ('assigned', 'running')") == 0;
      },
      30s));
  EXPECT_EQ(1, db.Count("select count(*) from pgfleet.job_events where kind = 'stop_requested'"
                        " and detail = 'system formation agent: host h2 is draining'"));
  EXPECT_EQ("3", db.Scalar("select desired from pgfleet.formation_status where name = 'agent'"));
}

TEST(SystemFormationTest, ASystemFormationNeedsACommandAndAKnownKindIsNamed) {
  TestDatabase db;
  Cluster cluster(db);
  auto r = cluster.Cli({"formation", "create", "x", "--kind", "system"});
  EXPECT_NE(0, r.exit_code);
  EXPECT_NE(std::string::npos, r.err.find("a system formation needs a command")) << r.err;
  r = cluster.Cli({"formation", "create", "x", "--kind", "daemonset", "--", "true"});
  EXPECT_NE(0, r.exit_code);
  EXPECT_NE(std::string::npos, r.err.find("--kind must be service, batch, system, sysbatch or cron"))
      << r.err;
  try {
    db.Scalar("insert into pgfleet.formations (name, kind) values ('y', 'system')");
    ADD_FAILURE() << "a system formation without a command was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string::npos,
              std::string(e.what()).find("a service, system, sysbatch or cron formation needs a command"))
        << e.what();
  }
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.formations where name in ('x', 'y')"));
}

}  // namespace
}  // namespace pgfleet::testing
