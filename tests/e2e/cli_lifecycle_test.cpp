// `pgfleet formation delete` and `pgfleet host remove` with real daemons (the
// first hour issue, item 10).

#include <gtest/gtest.h>

#include <thread>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class CliLifecycleTest : public OneHostClusterTest {};

TEST_F(CliLifecycleTest, DeletingAServiceStopsItsReplicasForGoodAndCreatingItAgainBringsItBack) {
  auto c = cluster_->Cli(
      {"formation", "create", "web", "--kind", "service", "--replicas", "2", "--", "sleep", "600"});
  ASSERT_EQ(0, c.exit_code) << c.err;
  auto running = [&] {
    return db_.Count(
        "select count(*) from pgfleet.jobs where formation = 'web' and state = 'running'");
  };
  ASSERT_TRUE(WaitFor([&] { return running() == 2; }, 30s)) << cluster_->Logs();

  auto d = cluster_->Cli({"formation", "delete", "web"});
  ASSERT_EQ(0, d.exit_code) << d.err;
  EXPECT_EQ("web deleted; 2 live jobs stopped, history kept\n", d.out);
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_.Count(
                   "select count(*) from pgfleet.jobs where formation = 'web' and state "
                   "not in ('cancelled')") == 0;
      },
      30s))
      << cluster_->Logs();
  // No replica comes back (the scheduler's service passes keep running).
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(2, db_.Count("select count(*) from pgfleet.jobs where formation = 'web'"));
  EXPECT_EQ(std::string::npos, cluster_->Cli({"formation", "list"}).out.find("web"));
  auto submit = cluster_->Cli({"run", "--formation", "web", "--", "true"});
  EXPECT_EQ(1, submit.exit_code);
  EXPECT_NE(std::string::npos, submit.err.find("formation \"web\" was deleted")) << submit.err;

  auto again = cluster_->Cli(
      {"formation", "create", "web", "--kind", "service", "--replicas", "1", "--", "sleep", "600"});
  ASSERT_EQ(0, again.exit_code) << again.err;
  EXPECT_TRUE(WaitFor([&] { return running() == 1; }, 30s)) << cluster_->Logs();
  auto dup = cluster_->Cli({"formation", "create", "web", "--", "true"});
  EXPECT_EQ(1, dup.exit_code);
  EXPECT_NE(std::string::npos, dup.err.find("already exists")) << dup.err;
}

TEST_F(CliLifecycleTest, ARemovedHostIsForgottenButItsJobsHistoryKeepsIt) {
  auto ran = cluster_->Cli({"run", "--wait", "--", "true"});
  ASSERT_EQ(0, ran.exit_code) << ran.err;
  auto up = cluster_->Cli({"host", "remove", "h1"});
  EXPECT_EQ(1, up.exit_code);
  EXPECT_NE(std::string::npos, up.err.find("only a lost or offline host can be removed")) << up.err;
  ASSERT_EQ(0, cluster_->Cli({"host", "offline", "h1"}).exit_code);
  cluster_->processes().back()->Stop();  // its hostd
  auto r = cluster_->Cli({"host", "remove", "h1"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  EXPECT_EQ("h1 removed\n", r.out);
  EXPECT_EQ(std::string::npos, cluster_->Cli({"hosts"}).out.find("h1"));
  EXPECT_EQ("h1", db_.Scalar("select host_id from pgfleet.jobs order by id desc limit 1"));
  auto again = cluster_->Cli({"host", "remove", "h1"});
  EXPECT_EQ(1, again.exit_code);
  EXPECT_NE(std::string::npos, again.err.find("host h1 does not exist")) << again.err;
}

}  // namespace
}  // namespace pgfleet::testing
