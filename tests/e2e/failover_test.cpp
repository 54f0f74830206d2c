// Host loss, end to end: the scheduler's sweep declares a silent host lost and
// its attempts run elsewhere within the TTL; the host that comes back kills its
// superseded copies (fencing by attempt).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <thread>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(FailoverTest, LostHostsJobsRunElsewhereWithinTheTtlOnlyOnceTheirCopiesWereFenced) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1", {"--host-ttl", "2"});
  cluster.StartHost("h1", 1000, 1000, {"--host-ttl", "2"});
  cluster.StartHost("h2", 1000, 1000, {"--host-ttl", "2"});
  ASSERT_TRUE(cluster.WaitHostsUp(2)) << cluster.Logs();

  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(0, cluster.Cli({"run", "--cpu", "200", "--", "sleep", "300"}).exit_code);
  ASSERT_TRUE(WaitFor(
      [&] { return db.Count("select count(*) from pgfleet.jobs where state = 'running'") == 3; },
      30s))
      << cluster.Logs();
  // Bin-packing puts all three on one host: that is the one we lose.
  std::string victim = db.Scalar("select min(host_id) from pgfleet.jobs");
  ASSERT_EQ(victim, db.Scalar("select max(host_id) from pgfleet.jobs"));
  std::string old_pids =
      db.Scalar("select string_agg(pid::text, ' ' order by id) from pgfleet.jobs");
  size_t victim_index = victim == "h1" ? 1 : 2;  // processes(): s1, h1, h2

  auto killed_at = Clock::now();
  cluster.processes()[victim_index]->Kill9();
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.jobs where state = 'running' and attempt = 2 and "
                   "host_id <> '" +
                   victim + "'") == 3;
      },
      20s))
      << cluster.Logs();
  auto failover = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed_at);
  // TTL 2 s after the last heartbeat (0.5 s interval) plus a generous margin for a loaded machine.
  EXPECT_LT(failover.count(), Slowed(8000ms).count()) << "replacement took " << failover.count() << " ms";
  std::cerr << "failover: all 3 attempts running elsewhere " << failover.count()
            << " ms after kill -9\n";
  EXPECT_EQ("lost", db.Scalar("select state from pgfleet.hosts where id = '" + victim + "'"));
  EXPECT_EQ(3, db.Count("select count(*) from pgfleet.job_events where kind = 'lost'"));
  EXPECT_EQ(3,
            db.Count("select count(*) from pgfleet.jobs where host_losses = 1 and failures = 0"));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.allocation_drift"));

  // The old copies are gone: hostd's death alone does not kill jobs, but one
  // away longer than the fence time (the TTL less 0.5 s) has its jobs fenced
  // by their shims before the host may be declared lost.
  std::istringstream pids(old_pids);
  std::vector<std::string> old;
  for (std::string p; pids >> p;) old.push_back(p);
  ASSERT_EQ(3u, old.size());
  for (const auto& p : old) EXPECT_TRUE(ProcessGone(p)) << "pid " << p << " outlived its lease";
  // The host comes back as a new generation.
  std::string gen_before =
      db.Scalar("select generation from pgfleet.hosts where id = '" + victim + "'");
  cluster.StartHost(victim, 1000, 1000, {"--host-ttl", "2"});
  EXPECT_TRUE(WaitFor(
      [&] {
        return db.Scalar("select state from pgfleet.hosts where id = '" + victim + "'") == "up" &&
               std::stoll(gen_before) <
                   std::stoll(db.Scalar("select generation from pgfleet.hosts where id = '" +
                                        victim + "'"));
      },
      20s))
      << cluster.Logs();
  // The new attempts were not disturbed, and nothing ran twice at once.
  EXPECT_EQ(3,
            db.Count("select count(*) from pgfleet.jobs where state = 'running' and attempt = 2"));
  EXPECT_EQ(0, db.AttemptsWithRepeated("running"));
}

TEST(FailoverTest, SweepIsIdempotentAndOneSchedulerWinsEachHost) {
  TestDatabase db;
  db.Scalar(
      "select pgfleet.register_host('gone', 'http://127.0.0.1:9', 1000, 1000, '{}', 'process', "
      "null)");
  db.Scalar("select pgfleet.submit(array['true'])");
  db.Scalar("select count(*) from pgfleet.assign_jobs('[{\"job\": 1, \"host\": \"gone\"}]')");
  db.Scalar("update pgfleet.host_heartbeats set last_seen = now() - interval '1 minute'");
  // Four sweeps at once: exactly one marks the host lost and requeues the job.
  std::vector<std::thread> sweepers;
  std::atomic<int> wins{0};
  for (int i = 0; i < 4; ++i) {
    sweepers.emplace_back([&] {
      auto c = db.Connect();
      pqxx::work tx(*c);
      wins += static_cast<int>(tx.exec("select * from pgfleet.sweep_lost_hosts(10, '-infinity')").size());
      tx.commit();
    });
  }
  for (auto& t : sweepers) t.join();
  EXPECT_EQ(1, wins.load());
  EXPECT_EQ("pending", db.Scalar("select state from pgfleet.jobs where id = 1"));
  EXPECT_EQ(1, db.Count("select count(*) from pgfleet.job_events where kind = 'lost'"));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.allocation_drift"));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.sweep_lost_hosts(10, '-infinity')"));
}

TEST(FailoverTest, JobLostWithThreeHostsFails) {
  TestDatabase db;
  db.Scalar("select pgfleet.submit(array['true'])");
  for (int i = 1; i <= 3; ++i) {
    std::string h = "h" + std::to_string(i);
    db.Scalar("select pgfleet.register_host('" + h +
              "', 'http://127.0.0.1:9', 1000, 1000, '{}', 'process', null)");
    db.Scalar("select count(*) from pgfleet.assign_jobs('[{\"job\": 1, \"host\": \"" + h +
              "\"}]')");
    db.Scalar(
        "update pgfleet.host_heartbeats set last_seen = now() - interval '1 minute' where host_id "
        "= '" +
        h + "'");
    db.Scalar("select count(*) from pgfleet.sweep_lost_hosts(10, '-infinity')");
  }
  EXPECT_EQ("failed", db.Scalar("select state from pgfleet.jobs where id = 1"));
  EXPECT_EQ("3", db.Scalar("select host_losses from pgfleet.jobs where id = 1"));
  EXPECT_NE(std::string::npos,
            db.Scalar("select error from pgfleet.jobs where id = 1").find("lost 3 times"));
  // The event log says the same: the last lost event is the job's end.
  EXPECT_EQ(1, db.Count("select count(*) from pgfleet.job_events where job_id = 1 and kind = "
                        "'lost' and detail like '%now failed; lost 3 times, giving up'"));
  EXPECT_EQ(2, db.Count("select count(*) from pgfleet.job_events where job_id = 1 and kind = "
                        "'lost' and detail not like '%giving up'"));
}

TEST(FailoverTest, FinishedJobsOlderThanRetainArePrunedWithTheirEvents) {
  TestDatabase db;
  db.Scalar("select pgfleet.submit(array['true'])");
  db.Scalar("select pgfleet.submit(array['true'])");
  db.Scalar("select pgfleet.cancel(1)");
  db.Scalar("select pgfleet.cancel(2)");
  db.Scalar("update pgfleet.jobs set finished_at = now() - interval '8 days' where id = 1");
  Cluster cluster(db);
  cluster.StartScheduler("s1", {"--retain", "7d"});
  ASSERT_TRUE(WaitFor([&] { return db.Count("select count(*) from pgfleet.jobs") == 1; }, 20s))
      << cluster.Logs();
  EXPECT_EQ("2", db.Scalar("select id from pgfleet.jobs"));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.job_events where job_id = 1"));
  auto bad =
      pgfleet::testing::Run({BinaryPath("pgfleet-schedulerd"), "--db", db.dsn(), "--token-file",
                             cluster.token_file(), "--retain", "seven days"});
  EXPECT_EQ(2, bad.exit_code);
  EXPECT_NE(std::string::npos, bad.err.find("--retain must be")) << bad.err;
}

}  // namespace
}  // namespace pgfleet::testing
