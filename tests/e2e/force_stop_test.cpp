// A job that ignores SIGTERM with the longest grace an operator allows
// (max_stop_grace_seconds) outlives a plain stop for that grace, and dies at
// once on `pgfleet stop --force` (pgfleet.force_stop), also while the plain
// stop's grace is running. Real daemons, the process driver.

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class ForceStopTest : public OneHostClusterTest {
 protected:
  std::string State(const std::string& id) {
    return db_.Scalar("select state from pgfleet.jobs where id = " + id);
  }
};

TEST_F(ForceStopTest, AJobIgnoringSigtermDiesAtOnceOnForceStop) {
  auto run = cluster_->Cli({"run", "--stop-grace", "300", "--", "sh", "-c",
                            "trap '' TERM; echo up; sleep 600 & wait; sleep 600"});
  ASSERT_EQ(0, run.exit_code) << run.err;
  std::string id = util::Trim(run.out);
  ASSERT_TRUE(WaitFor([&] { return State(id) == "running"; }, 30s)) << State(id);

  ASSERT_EQ(0, cluster_->Cli({"stop", id}).exit_code);
  // Sampled for 3 s: SIGTERM is ignored and the grace is 300 s.
  bool alive = true;
  for (int i = 0; i < 30 && alive; ++i) {
    alive = State(id) == "running";
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(alive) << State(id);

  auto forced = cluster_->Cli({"stop", "--force", id});
  EXPECT_EQ(0, forced.exit_code) << forced.err;
  EXPECT_EQ(id + " stopping\n", forced.out);
  ASSERT_TRUE(WaitFor([&] { return State(id) == "cancelled"; }, 15s)) << State(id)
                                                                       << cluster_->Logs();
  EXPECT_EQ(1, db_.Count("select count(*) from pgfleet.job_events where job_id = " + id +
                         " and kind = 'stop_requested' and detail like 'force-stopped%'"));
  EXPECT_NE(std::string::npos, cluster_->Logs().find("job=" + id + " attempt=1 force-stopped"));
  // Again: nothing more to do.
  EXPECT_EQ(id + " cancelled\n", cluster_->Cli({"stop", "--force", id}).out);
}

TEST_F(ForceStopTest, OnlyItsOwnerOrAnOperatorMayForceStopAJob) {
  std::string alice = db_.CreateLogin("alice", {"pgfleet_submitter"});
  std::string bob = db_.CreateLogin("bob", {"pgfleet_submitter"});
  auto run = cluster_->CliAs(db_.DsnAs(alice), {"run", "--", "sleep", "600"});
  ASSERT_EQ(0, run.exit_code) << run.err;
  std::string id = util::Trim(run.out);
  auto by_bob = cluster_->CliAs(db_.DsnAs(bob), {"stop", "--force", id});
  EXPECT_EQ(1, by_bob.exit_code);
  EXPECT_NE(std::string::npos, by_bob.err.find("does not exist, or is not yours")) << by_bob.err;
  EXPECT_EQ("f", db_.Scalar("select stop_force from pgfleet.jobs where id = " + id));
  // Nor can a submitter set it at insert.
  pqxx::connection c(db_.DsnAs(alice));
  pqxx::work tx(c);
  EXPECT_THROW(tx.exec0("insert into pgfleet.jobs (command, stop_force) values ('{true}', true)"),
               pqxx::sql_error);
}

}  // namespace
}  // namespace pgfleet::testing
