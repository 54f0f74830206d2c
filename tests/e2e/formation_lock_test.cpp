// Any login may take a formation's advisory lock (issue 34): that formation
// then waits, but never silently. Its pending jobs' error says who holds the
// lock, pgfleet.formation_locks shows it, the schedulers count it, and an
// operator's pgfleet.release_formation_lock ends that session.

#include <gtest/gtest.h>

#include <string>

#include "core/model/constants.h"
#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class FormationLockTest : public OneHostClusterTest {};

TEST_F(FormationLockTest, ALockHeldByASubmitterIsNamedOnItsJobsAndAnOperatorReleasesIt) {
  std::string alice = db_.CreateLogin("alice", {"pgfleet_submitter"});
  pqxx::connection holder(db_.DsnAs(alice));
  const std::string formation_id = db_.Scalar("select id from pgfleet.formations where name = 'default'");
  {
    pqxx::nontransaction tx(holder);
    tx.exec("select pg_advisory_lock(" + std::to_string(model::kLockClass) + ", " + formation_id + ")");
  }
  const std::string pid = pqxx::nontransaction(holder).exec1("select pg_backend_pid()")[0].as<std::string>();

  auto run = cluster_->Cli({"run", "--", "true"});
  ASSERT_EQ(0, run.exit_code) << run.err;
  std::string id = util::Trim(run.out);
  auto error = [&] { return db_.Scalar("select coalesce(error, '') from pgfleet.jobs where id = " + id); };
  // After the grace (10 s of the holder's session), the job says who holds it.
  ASSERT_TRUE(WaitFor([&] { return error().find("scheduling lock is held by pid " + pid) != std::string::npos; },
                      30s))
      << error();
  EXPECT_NE(std::string::npos, error().find("role " + alice)) << error();
  EXPECT_NE(std::string::npos, error().find("pgfleet.release_formation_lock('default')")) << error();
  EXPECT_EQ("pending", db_.Scalar("select state from pgfleet.jobs where id = " + id));
  EXPECT_EQ(pid, db_.Scalar("select string_agg(pid::text, ',') from pgfleet.formation_locks"
                            " where formation = 'default' and not is_scheduler"));
  // A submitter cannot end it; an operator can.
  std::string bob = db_.CreateLogin("bob", {"pgfleet_submitter"});
  try {
    pqxx::connection c(db_.DsnAs(bob));
    pqxx::nontransaction(c).exec("select pgfleet.release_formation_lock('default')");
    ADD_FAILURE() << "a submitter released the lock";
  } catch (const pqxx::sql_error& e) {
    EXPECT_NE(std::string::npos, std::string(e.what()).find("pgfleet_operator")) << e.what();
  }
  EXPECT_EQ("1", db_.Scalar("select pgfleet.release_formation_lock('default')"));
  EXPECT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "succeeded"; }, 20s))
      << error();
}

}  // namespace
}  // namespace pgfleet::testing
