// A job waiting for capacity starts when a host's report frees it: hostd
// wakes the sleeping scheduler once its report batch has committed (the
// report itself sends no NOTIFY: hostd/store.h WakeSchedulers). The
// scheduler runs with a 60 s tick, so nothing but that wake can start the
// waiting job within the test's wait.

#include <gtest/gtest.h>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

TEST(CapacityWakeTest, AJobWaitingForCapacityStartsWhenAReportFreesItNotAtTheTick) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1", {"--tick", "60"});
  cluster.StartHost("h1", 1000, 1000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  auto state = [&](const std::string& id) {
    return db.Scalar("select state from pgfleet.jobs where id = " + id);
  };
  // The first job takes the whole host for a second; the second waits.
  const std::string first = db.Scalar(
      "insert into pgfleet.jobs (command, cpu, memory) values ('{sleep,1}', 1000, 500) "
      "returning id");
  ASSERT_TRUE(WaitFor([&] { return state(first) == "running"; }, 20s)) << cluster.Logs();
  const std::string second = db.Scalar(
      "insert into pgfleet.jobs (command, cpu, memory) values ('{true}', 1000, 500) "
      "returning id");
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Scalar("select coalesce(error, '') from pgfleet.jobs where id = " + second)
                   .rfind("waiting for capacity", 0) == 0;
      },
      20s))
      << cluster.Logs();
  EXPECT_EQ(state(first), "running");  // still: the second waited for it
  ASSERT_TRUE(WaitFor([&] { return state(second) == "succeeded"; }, 20s)) << state(second) << "\n"
                                                                          << cluster.Logs();
  EXPECT_EQ(state(first), "succeeded");
  // Placed right after the first one's end, not at a tick.
  const double gap = std::stod(db.Scalar(
      "select extract(epoch from (select assigned_at from pgfleet.jobs where id = " + second +
      ") - (select finished_at from pgfleet.jobs where id = " + first + "))"));
  EXPECT_LT(gap, 10.0);
  EXPECT_GE(gap, 0.0);
}

}  // namespace
}  // namespace pgfleet::testing
