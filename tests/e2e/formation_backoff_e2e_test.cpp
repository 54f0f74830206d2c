// A formation whose scheduling pass fails every time (here: a deleted service
// formation given replicas again by a row written before the rule that now
// refuses it) must not make the scheduler spin (issue 34: 700-900 failures a
// second before): it backs off, says why on the formation's row, logs at a
// bounded rate, and every other formation's jobs run on time meanwhile.

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class FormationBackoffTest : public OneHostClusterTest {};

TEST_F(FormationBackoffTest, AFormationWhosePassKeepsFailingBacksOffAndSaysWhy) {
  db_.Scalar(
      "insert into pgfleet.formations (name, kind, replicas, command)"
      " values ('web', 'service', 0, '{sleep,60}')");
  // It has history (a job, ended by now: run, or stopped as a job beyond its
  // replicas), so its row stays, marked deleted.
  db_.Scalar("insert into pgfleet.jobs (command, formation) values ('{true}', 'web'); select 1");
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Scalar("select finished_at is not null from pgfleet.jobs where formation = 'web'") == "t"; },
      15s));
  EXPECT_EQ(0u, db_.Scalar("select pgfleet.delete_formation('web')").find("deleted; "));
  // Scaling it is refused now, by the function and by a plain UPDATE alike.
  auto scale = cluster_->Cli({"formation", "scale", "web", "3"});
  EXPECT_EQ(1, scale.exit_code);
  EXPECT_NE(std::string::npos, scale.err.find("formation web was deleted")) << scale.err;
  try {
    db_.Scalar("update pgfleet.formations set replicas = 2 where name = 'web'; select 1");
    ADD_FAILURE() << "a deleted formation took replicas";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string::npos, std::string(e.what()).find("its replicas stay 0")) << e.what();
  }
  // A row from before that rule: every pass of this formation fails.
  db_.Scalar(
      "alter table pgfleet.formations disable trigger formations_check_replicas;"
      " update pgfleet.formations set replicas = 2 where name = 'web';"
      " alter table pgfleet.formations enable trigger formations_check_replicas; select 1");

  // Other work runs on time meanwhile.
  auto run = cluster_->Cli({"run", "--", "true"});
  ASSERT_EQ(0, run.exit_code) << run.err;
  std::string id = util::Trim(run.out);
  EXPECT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "succeeded"; },
      15s));
  std::this_thread::sleep_for(5s);
  std::string log = cluster_->processes()[0]->Log();
  size_t logged = Count(log, "formation id=");
  EXPECT_GE(logged, 1u) << log;
  EXPECT_LE(logged, 3u) << "logged at most once every 30 s after the first";
  long long failures = db_.Count("select pass_failures from pgfleet.formations where name = 'web'");
  // 100 ms doubling: 6-8 tries in ~6 s, never hundreds.
  EXPECT_GE(failures, 3);
  EXPECT_LE(failures, 12);
  EXPECT_NE(std::string::npos,
            db_.Scalar("select pass_error from pgfleet.formations where name = 'web'").find("was deleted"));
}

}  // namespace
}  // namespace pgfleet::testing
