// Hosts behind a transaction-mode pooler (pgbouncer, pool_mode = transaction),
// the way a large fleet keeps PostgreSQL's connection count small: with
// --db-pooled, hostds send their statements unnamed and set nothing per
// session, so any number of them share a few server connections
// (docs/operations.md, "A large fleet"). The scheduler connects directly.

#include <gtest/gtest.h>

#include <string>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

TEST(PoolerTest, HostsBehindATransactionPoolerShareOneServerConnectionAndRunEachJobOnce) {
  TestDatabase db;
  // The pooler keeps a pool per login: the hosts share one, bound to each of
  // their ids (docs/operations.md), so pgfleet.require_host checks every call.
  std::string login = db.CreateLogin("fleet_hosts", {"pgfleet_host"});
  PgBouncer bouncer(db, /*pool_size=*/1, {login});
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  // 3 slots of 100 millicores each: 60 jobs must use every host.
  for (const char* id : {"h1", "h2", "h3"}) {
    db.Scalar("insert into pgfleet.host_logins (login, host_id) values ('" + login + "', '" + id +
              "')");
    cluster.StartHost(id, 300, 1024, {"--db", bouncer.Dsn(db, login), "--db-pooled"});
  }
  ASSERT_TRUE(cluster.WaitHostsUp(3)) << cluster.Logs() << bouncer.Log();

  db.Scalar("insert into pgfleet.jobs (command) select array['true'] from generate_series(1, 60)");
  bool done = WaitFor(
      [&] { return db.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == 60; },
      60s);
  ASSERT_TRUE(done) << db.Scalar(
                           "select string_agg(state || ' ' || n, ', ') from (select state, "
                           "count(*) n from pgfleet.jobs group by state) s")
                    << cluster.Logs() << bouncer.Log();
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
  for (const char* id : {"h1", "h2"}) {
    db.Scalar("insert into pgfleet.host_logins (login, host_id) values ('" + login + "', '" + id +
              "')");
    cluster.StartHost(id, 300, 1024, {"--db", bouncer.Dsn(db, login), "--db-pooled"});
  }
  ASSERT_TRUE(cluster.WaitHostsUp(2)) << cluster.Logs() << bouncer.Log();
  auto succeeded = [&](int n) {
    return WaitFor(
        [&] {
          try {
            return db.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == n;
          } catch (const std::exception&) {
            return false;  // the database is still coming back
          }
        },
        60s);
  };
  db.Scalar("insert into pgfleet.jobs (command) select array['true'] from generate_series(1, 20)");
  ASSERT_TRUE(succeeded(20)) << cluster.Logs();

  pg.Restart();
  db.Scalar("insert into pgfleet.jobs (command) select array['true'] from generate_series(1, 20)");
  ASSERT_TRUE(succeeded(40)) << db.Scalar(
                                    "select string_agg(state || ' ' || n, ', ') from (select "
                                    "state, count(*) n from pgfleet.jobs group by state) s")
                             << cluster.Logs() << bouncer.Log();
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
