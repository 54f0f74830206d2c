// A drain with a deadline never takes a service below its replicas: while
// no replacement can be placed the drain waits and says why (host_status,
// pgfleet hosts); once another host has room the replacements start there
// first and the drained host's replicas stop after, with the reason naming it.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

TEST(DrainServiceTest, ADeadlineWaitsForReplacementsAndSaysWhyThenMovesWithNoGap) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 1000, 1000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  ASSERT_EQ(0, cluster
                   .Cli({"formation", "create", "web", "--kind", "service", "--replicas", "2",
                         "--cpu", "400", "--", "sleep", "300"})
                   .exit_code);
  const std::string running =
      "select count(*) from pgfleet.jobs where formation = 'web' and state = 'running'"
      " and desired_state = 'run'";
  ASSERT_TRUE(WaitFor([&] { return db.Count(running) == 2; }, 30s)) << cluster.Logs();

  std::atomic<bool> stop{false};
  std::atomic<int> min_running{100};
  struct Joiner {  // a failed ASSERT must not leave the sampler running
    std::atomic<bool>& stop;
    std::thread& t;
    ~Joiner() {
      stop = true;
      if (t.joinable()) t.join();
    }
  };
  std::thread sampler([&] {
    auto c = db.Connect();
    while (!stop) {
      pqxx::work tx(*c);
      int n = tx.exec1(running)[0].as<int>();
      tx.commit();
      if (n < min_running) min_running = n;
      std::this_thread::sleep_for(100ms);
    }
  });
  Joiner joiner{stop, sampler};

  // The only host drained with a deadline: nowhere to put a replacement.
  auto drain = cluster.Cli({"drain", "h1", "--deadline", "1s"});
  ASSERT_EQ(0, drain.exit_code) << drain.err;
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Scalar("select drain_waiting_for from pgfleet.host_status where id = 'h1'")
                   .find("web: 2 replicas (") == 0;
      },
      20s))
      << db.Scalar("select drain_waiting_for from pgfleet.host_status where id = 'h1'");
  std::this_thread::sleep_for(3s);  // well past the deadline
  EXPECT_EQ(2, db.Count("select count(*) from pgfleet.jobs where formation = 'web'"
                        " and host_id = 'h1' and state = 'running' and desired_state = 'run'"))
      << "the deadline took the service's replicas down";
  // Its replacements' reason: the only other place, h1 itself, takes no new work.
  EXPECT_EQ("web: 2 replicas (no host is up)",
            db.Scalar("select drain_waiting_for from pgfleet.host_status where id = 'h1'"));
  auto hosts = cluster.Cli({"hosts"});
  EXPECT_NE(std::string::npos, hosts.out.find("draining (waits for web: 2 replicas")) << hosts.out;

  // Room elsewhere: the replacements run on h2 first, then h1's replicas stop.
  cluster.StartHost("h2", 1000, 1000);
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Count("select count(*) from pgfleet.jobs where formation = 'web'"
                        " and host_id = 'h2' and state = 'running'") == 2 &&
               db.Count("select count(*) from pgfleet.jobs where formation = 'web'"
                        " and host_id = 'h1' and state in ('assigned', 'running')") == 0;
      },
      60s))
      << cluster.Logs();
  stop = true;
  sampler.join();
  EXPECT_GE(min_running.load(), 2) << "the service went below its replicas during the drain";
  EXPECT_EQ("", db.Scalar("select drain_waiting_for from pgfleet.host_status where id = 'h1'"));
  EXPECT_EQ(2, db.Count("select count(*) from pgfleet.job_events where kind = 'stop_requested'"
                        " and detail = 'moved off draining host h1'"))
      << db.Scalar("select string_agg(kind || ': ' || coalesce(detail, ''), '; ')"
                   " from pgfleet.job_events where kind like 'stop%'");
}

}  // namespace
}  // namespace pgfleet::testing
