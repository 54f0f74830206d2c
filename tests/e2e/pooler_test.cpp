// Hosts behind a transaction-mode pooler (pgbouncer, pool_mode = transaction),
// the way a large fleet keeps PostgreSQL's connection count small: with
// --db-pooled, hostds send their statements unnamed and set nothing per
// session, so any number of them share a few server connections
// (docs/operations.md, "A large fleet"). The scheduler connects directly.

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <iostream>
#include <memory>
#include <string>
#include <thread>
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
    db.Scalar("insert into pgfleet.host_logins (login, host_id, auto_admit) values ('" + login +
              "', '" + id + "', true)");
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

// Jobs that run through a database restart: job N holds an exclusive flock
// on <dir>/lock-N while it runs, and exits 42 at once if another attempt of
// it still holds it, so two attempts of one job running at once fail it.
void SubmitLockedSleeps(const TestDatabase& db, const std::string& dir, int n, int seconds) {
  db.Scalar("insert into pgfleet.jobs (command) select array['sh', '-c', 'exec 9>>" + dir +
            "/lock-' || g || '; flock -n 9 || exit 42; sleep " + std::to_string(seconds) +
            "'] from generate_series(1, " + std::to_string(n) + ") g");
}

// Stops PostgreSQL under the pooler for 2 s while jobs run, then submits 20 more,
// and waits until all have succeeded (false after 60 s). The hosts' ids are
// h1 and h2.
struct RestartRun {
  PrivatePostgres pg;
  TestDatabase db{pg.admin_dsn(), true};
  std::string login = db.CreateLogin("fleet_hosts", {"pgfleet_host"});
  TempDir locks;
  std::unique_ptr<PgBouncer> bouncer;
  std::unique_ptr<Cluster> cluster;

  explicit RestartRun(PgBouncer::Settings settings) {
    chmod(locks.path().c_str(), 0777);
    bouncer = std::make_unique<PgBouncer>(db, /*pool_size=*/2, std::vector<std::string>{login},
                                          settings);
    cluster = std::make_unique<Cluster>(db);
    cluster->StartScheduler("s1");
    StartPooledHosts(db, *cluster, *bouncer, login, {"h1", "h2"});
  }
  // 4 jobs of `seconds` running when the database restarts.
  bool Run(int seconds) {
    if (!cluster->WaitHostsUp(2)) return false;
    SubmitLockedSleeps(db, locks.path(), 4, seconds);
    if (!WaitFor([&] { return db.Count("select count(*) from pgfleet.jobs where state = 'running'") == 4; },
                 20s)) {
      return false;
    }
    // Down for 2 s: the hosts' next statements make the pooler try a server
    // login that fails, as the first logins after any restart may.
    pg.Stop();
    std::this_thread::sleep_for(2s);
    pg.Start();
    WaitFor([&] {
      try {
        db.Scalar("insert into pgfleet.jobs (command) select array['true'] from generate_series(1, 20)");
        return true;
      } catch (const std::exception&) {
        return false;
      }
    }, 20s);
    return WaitSucceeded(db, 24);
  }
  std::string Why() {
    return JobStates(db) + "\n" +
           db.Scalar("select string_agg(id || ' attempt ' || attempt || ': ' || error, '\n' order by id)"
                     " from pgfleet.jobs where state = 'failed'") +
           "\n" + cluster->Logs() + bouncer->Log();
  }
};

// PostgreSQL restarts under a pooler configured as docs/operations.md says,
// while jobs run: every server connection breaks while the hosts' connections
// to the pooler stay up; each host's step fails once and the next runs on a
// new server connection. No host is declared lost, no job needs a second
// attempt, nothing runs twice.
TEST(PoolerTest, HostsBehindThePoolerRideThroughADatabaseRestart) {
  RestartRun run(PgBouncer::Settings::kAsDocumented);
  ASSERT_TRUE(run.Run(6)) << run.Why();
  const TestDatabase& db = run.db;
  EXPECT_EQ(db.Count("select count(*) from pgfleet.hosts where state = 'lost' or lost_at is not null"), 0)
      << run.Why();
  EXPECT_EQ(db.Count("select count(*) from pgfleet.job_events where kind = 'lost'"), 0);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs where attempt <> 1"), 0);
  EXPECT_EQ(db.Count("select max(generation) from pgfleet.hosts"), 1) << "a host registered again";
  EXPECT_EQ(db.AttemptsWithRepeated("running"), 0);
  EXPECT_TRUE(run.cluster->WaitHostsUp(2)) << run.cluster->Logs();
  EXPECT_EQ(db.Count("select count(*) from pgfleet.allocation_drift"), 0);
}

// The same under pgbouncer's own server_login_retry (15 s): the hosts may stay
// cut off past the TTL. Whether they do depends on how the restart and the
// pooler's first login race, so this asserts what must hold either way: a job
// runs again only after its first attempt was stopped (the host fenced it by
// its own clock before the database could declare the host lost), never two
// attempts at once, and every job ends.
TEST(PoolerTest, WithPgbouncersDefaultsJobsAreStoppedBeforeTheyRunAgain) {
  RestartRun run(PgBouncer::Settings::kPgbouncerDefaults);
  ASSERT_TRUE(run.Run(12)) << run.Why();
  const TestDatabase& db = run.db;
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs where exit_code = 42"), 0)
      << "two attempts of a job ran at once";
  EXPECT_EQ(db.AttemptsWithRepeated("running"), 0);
  // Every second attempt follows a lost one (fenced, or lost with its host).
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs j where attempt > 1 and not exists ("
                     "select 1 from pgfleet.job_events e where e.job_id = j.id and e.kind = 'lost')"),
            0);
  std::cout << "pooler defaults: hosts_lost="
            << db.Scalar("select count(*) from pgfleet.hosts where lost_at is not null")
            << " jobs_run_again=" << db.Scalar("select count(*) from pgfleet.jobs where attempt > 1")
            << " lost_events=" << db.Scalar("select count(*) from pgfleet.job_events where kind = 'lost'")
            << " max_host_losses=" << db.Scalar("select max(host_losses) from pgfleet.jobs")
            << "\n";
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
