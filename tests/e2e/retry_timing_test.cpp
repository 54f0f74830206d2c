// A failed batch attempt is retried when its backoff (1 s, then 2 s) ends, as
// documented, not at the scheduler's next safety-net tick (the first hour
// issue, item 7: 1.7 s and 3.0 s were measured against 1 s and 2 s). The
// scheduler runs with a 5 s tick, so waiting for the tick would show.

#include <gtest/gtest.h>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

TEST(RetryTimingTest, EachRetryStartsWhenItsBackoffEndsNotAtTheNextTick) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1", {"--tick", "5"});
  cluster.StartHost("h1", 1000, 1000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  std::string id = db.Scalar(
      "insert into pgfleet.jobs (command, max_attempts) values ('{sh,-c,exit 3}', 3) returning id");
  ASSERT_TRUE(WaitFor(
      [&] { return db.Scalar("select state from pgfleet.jobs where id = " + id) == "failed"; },
      30s))
      << cluster.Logs();
  // From each requeue (the failed exit recorded) to the next attempt's assignment.
  auto gap = [&](int attempt) {
    return std::stod(db.Scalar(
        "select extract(epoch from (select at from pgfleet.job_events where job_id = " + id +
        " and kind = 'assigned' and attempt = " + std::to_string(attempt + 1) +
        ") - (select at from pgfleet.job_events where job_id = " + id +
        " and kind = 'requeued' and attempt = " + std::to_string(attempt) + "))"));
  };
  double first = gap(1), second = gap(2);
  std::cout << "retry gaps: " << first << " s, " << second << " s (backoff 1 s, 2 s)\n";
  EXPECT_GE(first, 1.0);
  EXPECT_LT(first, 2.0);
  EXPECT_GE(second, 2.0);
  EXPECT_LT(second, 3.0);
}

}  // namespace
}  // namespace pgfleet::testing
