// Drain: no new work on the host; service replicas move elsewhere (started
// there first, then stopped), batch jobs are stopped and requeued elsewhere
// once the drain deadline passes.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

TEST(DrainTest, ServiceReplicasMoveStartFirstAndBatchJobsMoveAtTheDeadline) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 1000, 1000);
  cluster.StartHost("h2", 1000, 1000);
  ASSERT_TRUE(cluster.WaitHostsUp(2)) << cluster.Logs();
  ASSERT_EQ(0, cluster
                   .Cli({"formation", "create", "web", "--kind", "service", "--replicas", "2",
                         "--cpu", "100", "--", "sleep", "300"})
                   .exit_code);
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.jobs where formation = 'web' and state = "
                   "'running'") == 2;
      },
      30s))
      << cluster.Logs();
  auto batch = cluster.Cli({"run", "--cpu", "100", "--stop-grace", "1", "--", "sleep", "300"});
  std::string batch_id = batch.out.substr(0, batch.out.find('\n'));
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Scalar("select state from pgfleet.jobs where id = " + batch_id) == "running";
      },
      30s));
  // Bin-packing put everything on one host: drain that one.
  std::string victim = db.Scalar("select host_id from pgfleet.jobs where id = " + batch_id);
  ASSERT_EQ(1,
            db.Count("select count(distinct host_id) from pgfleet.jobs where state = 'running'"));
  std::string other = victim == "h1" ? "h2" : "h1";

  std::atomic<bool> stop{false};
  std::atomic<int> min_serving{100};
  std::thread sampler([&] {
    auto c = db.Connect();
    while (!stop) {
      pqxx::work tx(*c);
      int n =
          tx.exec1(
                "select count(*) from pgfleet.jobs where formation = 'web' and state = 'running'")
              [0]
                  .as<int>();
      tx.commit();
      min_serving = std::min(min_serving.load(), n);
      std::this_thread::sleep_for(20ms);
    }
  });
  auto r = cluster.Cli({"drain", victim, "--deadline", "3s"});
  EXPECT_EQ(0, r.exit_code) << r.err;
  bool moved = WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.jobs where formation = 'web' and state = "
                   "'running' and host_id = '" +
                   other + "'") == 2 &&
               db.Count("select count(*) from pgfleet.jobs where host_id = '" + victim +
                        "' and state in ('assigned', 'running')") == 0 &&
               db.Scalar("select state || '/' || host_id from pgfleet.jobs where id = " +
                         batch_id) == "running/" + other;
      },
      40s);
  stop = true;
  sampler.join();
  ASSERT_TRUE(moved)
      << db.Scalar(
             "select string_agg(id || ':' || formation || ':' || state || ':' || host_id, ' ')"
             " from pgfleet.jobs")
      << cluster.Logs();
  EXPECT_GE(min_serving.load(), 2) << "a drain must never drop a service below its replicas";
  EXPECT_EQ("2", db.Scalar("select attempt from pgfleet.jobs where id = " + batch_id));
  EXPECT_EQ("0", db.Scalar("select failures from pgfleet.jobs where id = " + batch_id));
  EXPECT_EQ(1, db.Count("select count(*) from pgfleet.job_events where job_id = " + batch_id +
                        " and kind = 'requeued' and detail like '%draining host%'"));
  EXPECT_EQ(
      2, db.Count(
             "select count(*) from pgfleet.jobs where formation = 'web' and state = 'cancelled'"));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.allocation_drift"));
  // Nothing new lands on the draining host.
  auto j = cluster.Cli({"run", "--", "true"});
  std::string id = j.out.substr(0, j.out.find('\n'));
  ASSERT_TRUE(WaitFor(
      [&] { return db.Scalar("select state from pgfleet.jobs where id = " + id) == "succeeded"; },
      20s));
  EXPECT_EQ(other, db.Scalar("select host_id from pgfleet.jobs where id = " + id));
  // Back online: it takes work again.
  EXPECT_EQ(0, cluster.Cli({"host", "online", victim}).exit_code);
  EXPECT_EQ("up", db.Scalar("select state from pgfleet.hosts where id = '" + victim + "'"));
  EXPECT_EQ(2, cluster.Cli({"drain", victim, "--deadline", "soon"}).exit_code);
  EXPECT_EQ(1, cluster.Cli({"drain", "no-such-host"}).exit_code);
  EXPECT_EQ(2, cluster.Cli({"host", "sideways", victim}).exit_code);
  EXPECT_EQ("up", db.Scalar("select state from pgfleet.hosts where id = '" + victim + "'"));
}

TEST(PriorityTest, HigherPriorityJobsArePlacedFirstAcrossFormationsWhenCapacityIsShort) {
  TestDatabase db;
  // Queue everything before any scheduler or host exists, then open one slot at a time.
  for (int i = 0; i < 3; ++i)
    db.Scalar("select pgfleet.submit(array['true'], 'low', 1000, 64, priority => 10)");
  for (int i = 0; i < 3; ++i)
    db.Scalar("select pgfleet.submit(array['true'], 'high', 1000, 64, priority => 90)");
  Cluster cluster(db);
  cluster.StartHost("h1", 1000, 1000);
  ASSERT_TRUE(cluster.WaitHostsUp(1));
  cluster.StartScheduler("s1");
  ASSERT_TRUE(WaitFor(
      [&] { return db.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == 6; },
      60s))
      << cluster.Logs();
  // One slot: the order of assignment is the order of priority.
  EXPECT_EQ("high,high,high,low,low,low",
            db.Scalar("select string_agg(j.formation, ',' order by e.id) from pgfleet.job_events e"
                      " join pgfleet.jobs j on j.id = e.job_id where e.kind = 'assigned'"));
}

TEST(IdempotencyTest, SubmittingTwiceWithOneKeyReturnsTheFirstJob) {
  TestDatabase db;
  Cluster cluster(db);
  auto a = cluster.Cli({"run", "--idempotency-key", "nightly-2026-11-21", "--", "true"});
  auto b = cluster.Cli({"run", "--idempotency-key", "nightly-2026-11-21", "--", "false"});
  ASSERT_EQ(0, a.exit_code) << a.err;
  ASSERT_EQ(0, b.exit_code) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(1, db.Count("select count(*) from pgfleet.jobs"));
}

}  // namespace
}  // namespace pgfleet::testing
