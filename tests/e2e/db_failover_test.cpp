// PostgreSQL itself fails over: a primary with a synchronous streaming
// standby (pg_basebackup), every daemon given both in one multi-host DSN
// (target_session_attrs=read-write). Jobs are inserted throughout; the
// primary is killed (-m immediate) mid-run and the standby promoted. Every
// job must end exactly once, no attempt may run twice, no host may be
// overcommitted, and the cluster must resume on the new primary by itself.

#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kJobs = 200;

// A primary with a synchronous streaming standby, a test database on it,
// and the multi-host DSN naming both (target_session_attrs=read-write), as
// every daemon gets it for a failover.
struct SyncPair {
  PrivatePostgres primary;
  // Made before the database and destroyed after it: with synchronous
  // replication on, the primary would wait for a standby that is gone before
  // dropping the test's database.
  std::unique_ptr<PrivatePostgres> standby_owner;
  TestDatabase db{primary.admin_dsn(), true};
  std::string both;
  bool synchronous = false;

  SyncPair() {
    standby_owner = std::make_unique<PrivatePostgres>(PrivatePostgres::StandbyOf{primary});
    synchronous = primary.MakeReplicationSynchronous();
    both = primary.FailoverDsn(*standby_owner, db.name());
  }
  PrivatePostgres& standby() { return *standby_owner; }
  // One statement through the failover DSN; its first value ("" for null).
  std::string Query(const std::string& sql) const {
    pqxx::connection c(both);
    pqxx::work tx(c);
    auto r = tx.exec1(sql);
    tx.commit();
    return r[0].is_null() ? "" : r[0].as<std::string>();
  }
};


TEST(DatabaseFailoverTest, APromotedSynchronousStandbyTakesOverAndEveryJobEndsExactlyOnce) {
  SyncPair pair;
  ASSERT_TRUE(pair.synchronous);
  PrivatePostgres& primary = pair.primary;
  PrivatePostgres& standby = pair.standby();
  const TestDatabase& db = pair.db;
  const std::string& both = pair.both;
  auto query = [&](const std::string& sql) { return pair.Query(sql); };

  Cluster cluster(db);
  cluster.StartScheduler("s1", {"--db", both});
  cluster.StartScheduler("s2", {"--db", both});
  for (const char* h : {"h1", "h2"}) cluster.StartHost(h, 4000, 4000, {"--db", both});
  ASSERT_TRUE(cluster.WaitHostsUp(2)) << cluster.Logs();

  // A client inserting jobs throughout, as an application would: each with an
  // idempotency key, retried until it commits, so none is lost or doubled.
  std::atomic<int> inserted{0};
  std::atomic<bool> give_up{false};
  std::thread client([&] {
    for (int i = 0; i < kJobs; ++i) {
      while (!give_up) {
        try {
          query("select pgfleet.submit(array['sh', '-c', 'sleep 0.2'], idempotency_key => 'k" +
                std::to_string(i) + "')");
          break;
        } catch (const std::exception&) {
          std::this_thread::sleep_for(100ms);
        }
      }
      if (give_up) return;
      ++inserted;
      std::this_thread::sleep_for(15ms);
    }
  });
  std::atomic<bool> stop_sampler{false};
  std::atomic<int> overcommits{0}, samples{0};
  std::thread sampler([&] {
    while (!stop_sampler) {
      try {
        overcommits += std::stoi(query(
            "select count(*) from pgfleet.hosts where cpu_allocated > cpu or memory_allocated "
            "> memory or cpu_allocated < 0 or memory_allocated < 0"));
        ++samples;
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(50ms);
    }
  });

  // Threads are joined on every way out of the test (an ASSERT returns early).
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& a;
    std::thread& b;
    std::atomic<bool>& give_up;
    ~Joiner() {
      give_up = true;
      stop = true;
      if (a.joinable()) a.join();
      if (b.joinable()) b.join();
    }
  } joiner{stop_sampler, client, sampler, give_up};
  ASSERT_TRUE(WaitFor([&] { return inserted >= kJobs / 2; }, 60s));
  auto crash = Clock::now();
  primary.Crash();
  standby.Promote();
  // Recovered: a job inserted after the promotion runs to its end.
  std::string probe;
  ASSERT_TRUE(WaitFor(
      [&] {
        try {
          if (probe.empty()) probe = query("select pgfleet.submit(array['true'])");
          return query("select state from pgfleet.jobs where id = " + probe) == "succeeded";
        } catch (const std::exception&) {
          return false;
        }
      },
      60s))
      << cluster.Logs();
  double recovered = std::chrono::duration<double>(Clock::now() - crash).count();
  client.join();

  ASSERT_TRUE(WaitFor(
      [&] {
        return query("select count(*) from pgfleet.jobs where state = 'succeeded'") ==
               std::to_string(kJobs + 1);
      },
      120s))
      << query(
             "select string_agg(state || '=' || n, ' ') from (select state, count(*) n from "
             "pgfleet.jobs group by state) s")
      << cluster.Logs();
  stop_sampler = true;
  sampler.join();

  int jobs = std::stoi(query("select count(*) from pgfleet.jobs"));
  int succeeded = std::stoi(query("select count(*) from pgfleet.jobs where state = 'succeeded'"));
  int duplicates = std::stoi(
      query("select count(*) from (select job_id, attempt from pgfleet.job_events where kind = "
            "'running' group by 1, 2 having count(*) > 1) x"));
  int reruns = std::stoi(query("select count(*) from pgfleet.jobs where attempt <> 1"));
  std::cout << "failover: jobs=" << jobs << " succeeded=" << succeeded
            << " duplicates=" << duplicates << " overcommits=" << overcommits.load()
            << " seconds_to_recover=" << recovered << "\n";
  EXPECT_EQ(kJobs + 1, jobs) << "a job was lost or inserted twice";
  EXPECT_EQ(kJobs + 1, succeeded);
  EXPECT_EQ(0, duplicates);
  EXPECT_EQ(0, reruns) << "a job needed a second attempt";
  EXPECT_EQ(0, overcommits.load());
  EXPECT_GT(samples.load(), 10);
  EXPECT_EQ("0", query("select count(*) from pgfleet.allocation_drift"));
  EXPECT_EQ("f", query("select pg_is_in_recovery()"));  // on the promoted standby
  EXPECT_EQ("0", query("select count(*) from pgfleet.hosts where lost_at is not null"))
      << "a host was declared lost during the failover";
}

// A slower failover, the standby promoted 6.5 s after the primary died, while
// jobs run: within the host TTL (10 s), so no host may be declared lost and
// no job stopped. The hosts reconnect within a heartbeat of the promotion
// (their reconnect backoff is capped at the heartbeat interval: with 5 s, the
// attempt after a 6.5 s outage came at 11.2 s, past their 9.5 s lease, and every
// job was fenced), and the schedulers judge no host on the time the database
// was away (pgfleet.hosts_judged_from).
TEST(DatabaseFailoverTest, AFailoverWithinTheTtlDeclaresNoHostLostAndStopsNoJob) {
  SyncPair pair;
  ASSERT_TRUE(pair.synchronous);
  PrivatePostgres& primary = pair.primary;
  PrivatePostgres& standby = pair.standby();
  const TestDatabase& db = pair.db;
  const std::string& both = pair.both;
  auto query = [&](const std::string& sql) { return pair.Query(sql); };
  Cluster cluster(db);
  cluster.StartScheduler("s1", {"--db", both});
  for (const char* h : {"h1", "h2"}) cluster.StartHost(h, 4000, 4000, {"--db", both});
  ASSERT_TRUE(cluster.WaitHostsUp(2)) << cluster.Logs();
  query("with j as (insert into pgfleet.jobs (command) select array['sleep', '12']"
        " from generate_series(1, 4) returning 1) select count(*) from j");
  ASSERT_TRUE(WaitFor([&] { return query("select count(*) from pgfleet.jobs where state = 'running'") == "4"; },
                      20s))
      << cluster.Logs();

  primary.Crash();
  std::this_thread::sleep_for(6500ms);
  standby.Promote();
  ASSERT_TRUE(WaitFor(
      [&] {
        try {
          return query("select count(*) from pgfleet.jobs where state = 'succeeded'") == "4";
        } catch (const std::exception&) {
          return false;
        }
      },
      60s))
      << query("select string_agg(id || ' ' || state || ' ' || coalesce(error, ''), '; ') from pgfleet.jobs")
      << cluster.Logs();
  EXPECT_EQ("0", query("select count(*) from pgfleet.jobs where attempt <> 1"));
  EXPECT_EQ("0", query("select count(*) from pgfleet.job_events where kind = 'lost'"));
  EXPECT_EQ("0", query("select count(*) from pgfleet.hosts where lost_at is not null"));
  EXPECT_EQ(cluster.Logs().find("self-fenced"), std::string::npos) << cluster.Logs();
}

}  // namespace
}  // namespace pgfleet::testing
