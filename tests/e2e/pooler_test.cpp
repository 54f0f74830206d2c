// Hosts behind a transaction-mode pooler (pgbouncer, pool_mode = transaction),
// the way a large fleet keeps PostgreSQL's connection count small: with
// --db-pooled, hostds send their statements unnamed and set nothing per
// session, so any number of them share a few server connections
// (docs/operations.md, "A large fleet"). The scheduler connects directly.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

// Starts hosts `ids` behind `bouncer` with --db-pooled. The pooler keeps a
// pool per login: the hosts share `login`, bound to each of their ids
// (docs/operations.md), so pgfleet.require_host checks every call. 3 slots
// of 100 millicores each.
void StartPooledHosts(const TestDatabase& db, Cluster& cluster, const PgBouncer& bouncer,
                      const std::string& login, const std::vector<std::string>& ids) {
  for (const auto& id : ids) {
    db.Scalar("insert into pgfleet.host_logins (login, host_id) values ('" + login + "', '" + id +
              "')");
    cluster.StartHost(id, 300, 1024, {"--db", bouncer.Dsn(db, login), "--db-pooled"});
  }
}

// Until n jobs succeeded (false after 60 s); a database still coming back
// counts as not yet.
bool WaitSucceeded(const TestDatabase& db, int n) {
  return WaitFor(
      [&] {
        try {
          return db.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == n;
        } catch (const std::exception&) {
          return false;
        }
      },
      60s);
}

// "succeeded 59, running 1": for failure messages.
std::string JobStates(const TestDatabase& db) {
  return db.Scalar(
      "select string_agg(state || ' ' || n, ', ') from (select state, count(*) n "
      "from pgfleet.jobs group by state) s");
}

TEST(PoolerTest, HostsBehindATransactionPoolerShareOneServerConnectionAndRunEachJobOnce) {
  TestDatabase db;
  std::string login = db.CreateLogin("fleet_hosts", {"pgfleet_host"});
  PgBouncer bouncer(db, /*pool_size=*/1, {login});
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  // 3 slots each: 60 jobs must use every host.
  StartPooledHosts(db, cluster, bouncer, login, {"h1", "h2", "h3"});
  ASSERT_TRUE(cluster.WaitHostsUp(3)) << cluster.Logs() << bouncer.Log();

  db.Scalar("insert into pgfleet.jobs (command) select array['true'] from generate_series(1, 60)");
  ASSERT_TRUE(WaitSucceeded(db, 60)) << JobStates(db) << cluster.Logs() << bouncer.Log();
  EXPECT_EQ(db.AttemptsWithRepeated("running"), 0);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs where attempt <> 1"), 0);
  EXPECT_EQ(db.Count("select count(distinct host_id) from pgfleet.jobs"), 3);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.allocation_drift"), 0);

  // Three hosts, one server connection: heartbeats, reports and reconciles
  // all went through it.
  PgBouncer::Pool pool = bouncer.PoolOf(db.name(), login);
  EXPECT_EQ(pool.clients, 3);
  EXPECT_LE(pool.servers, 1);
  // No statement failed on a server connection that did not know it (what
  // named prepared statements do behind such a pooler).
  for (auto& p : cluster.processes()) {
    EXPECT_EQ(p->Log().find("prepared statement"), std::string::npos) << p->Log();
    EXPECT_EQ(p->Log().find("database step failed"), std::string::npos) << p->Log();
  }
}

// PostgreSQL restarts under the pooler: every server connection breaks while
// the hosts' connections to the pooler stay up. Each host's step fails once
// and the next runs on a new server connection; nothing is lost or run twice.
TEST(PoolerTest, HostsBehindThePoolerRideThroughADatabaseRestart) {
  PrivatePostgres pg;
  TestDatabase db(pg.admin_dsn(), true);
  std::string login = db.CreateLogin("fleet_hosts", {"pgfleet_host"});
  PgBouncer bouncer(db, /*pool_size=*/2, {login});
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  StartPooledHosts(db, cluster, bouncer, login, {"h1", "h2"});
  ASSERT_TRUE(cluster.WaitHostsUp(2)) << cluster.Logs() << bouncer.Log();
  db.Scalar("insert into pgfleet.jobs (command) select array['true'] from generate_series(1, 20)");
  ASSERT_TRUE(WaitSucceeded(db, 20)) << cluster.Logs();

  pg.Restart();
  db.Scalar("insert into pgfleet.jobs (command) select array['true'] from generate_series(1, 20)");
  ASSERT_TRUE(WaitSucceeded(db, 40)) << JobStates(db) << cluster.Logs() << bouncer.Log();
  EXPECT_EQ(db.AttemptsWithRepeated("running"), 0);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs where attempt <> 1"), 0);
  EXPECT_TRUE(cluster.WaitHostsUp(2)) << cluster.Logs();
  EXPECT_EQ(db.Count("select count(*) from pgfleet.allocation_drift"), 0);
}

// The control experiment: without --db-pooled, two hostds behind the same
// pooler break each other's named statements, so the test above shows the
// flag at work, not a pooler that happens to pin sessions.
TEST(PoolerTest, WithoutTheFlagHostsBehindATransactionPoolerFail) {
  TestDatabase db;
  PgBouncer bouncer(db, /*pool_size=*/1);
  Cluster cluster(db);
  for (const char* id : {"h1", "h2"}) cluster.StartHost(id, 300, 1024, {"--db", bouncer.Dsn(db)});
  bool failed = WaitFor(
      [&] {
        for (auto& p : cluster.processes()) {
          if (p->Log().find("prepared statement") != std::string::npos) return true;
        }
        return false;
      },
      20s);
  EXPECT_TRUE(failed) << cluster.Logs();
}

}  // namespace
}  // namespace pgfleet::testing
