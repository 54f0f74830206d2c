// Sysbatch formations in SQL (migration 0030): the kind's named rules,
// pgfleet.formation_done (who may call it, on what, and that a refused call
// changes nothing), the jobs pgfleet.insert_replicas makes of it, and what
// formation_status says of them.

#include <gtest/gtest.h>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

class SysbatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    alice_login_ = db_.CreateLogin("alice", {"pgfleet_submitter"});
    olga_login_ = db_.CreateLogin("olga", {"pgfleet_operator"});
    alice_ = std::make_unique<Sql>(db_.DsnAs(alice_login_));
    olga_ = std::make_unique<Sql>(db_.DsnAs(olga_login_));
  }
  // Every formation and job, to show a refused call changed nothing.
  std::string Everything() {
    return owner_.Str(
        "select md5(coalesce((select string_agg(f::text, '|' order by id) from pgfleet.formations "
        "f), '') || coalesce((select string_agg(j::text, '|' order by id) from pgfleet.jobs j), "
        "''))");
  }
  std::string Status(const std::string& column, const std::string& formation) {
    return owner_.Str("select " + column + "::text from pgfleet.formation_status where name = $1",
                      formation);
  }

  TestDatabase db_;
  Sql owner_{db_};
  std::string alice_login_, olga_login_;
  std::unique_ptr<Sql> alice_, olga_;
};

TEST_F(SysbatchTest, AnUnknownKindOrASysbatchWithoutACommandIsRefusedNamingTheRule) {
  std::string err = olga_->ErrorOf(
      "insert into pgfleet.formations (name, kind, command) values ('x', 'sysbatchx', '{true}')");
  EXPECT_NE(std::string::npos, err.find("kind must be service, batch, system, sysbatch or cron")) << err;
  err = olga_->ErrorOf("insert into pgfleet.formations (name, kind) values ('x', 'sysbatch')");
  EXPECT_NE(std::string::npos, err.find("a service, system, sysbatch or cron formation needs a command"))
      << err;
  err = olga_->ErrorOf(
      "insert into pgfleet.formations (name, kind, command, max_attempts) "
      "values ('x', 'sysbatch', '{true}', 0)");
  EXPECT_NE(std::string::npos, err.find("max_attempts must be >= 1")) << err;
  err = olga_->ErrorOf(
      "insert into pgfleet.formations (name, kind, replicas, command, done_at) "
      "values ('x', 'service', 1, '{true}', now())");
  EXPECT_NE(std::string::npos, err.find("only a sysbatch formation can be done")) << err;
  EXPECT_EQ(0, owner_.Num("select count(*) from pgfleet.formations where name = 'x'"));
}

TEST_F(SysbatchTest, FormationDoneOnWhatIsNotItsOwnSysbatchFormationIsRefusedAndChangesNothing) {
  olga_->Exec(
      "insert into pgfleet.formations (name, kind, command) values ('upgrade', 'sysbatch', "
      "'{true}'), ('agent', 'system', '{sleep,60}'), ('web', 'service', '{sleep,60}')");
  olga_->Exec("select pgfleet.delete_formation('web')");
  const std::string before = Everything();

  std::string err = olga_->ErrorOf("select pgfleet.formation_done('nope')");
  EXPECT_NE(std::string::npos, err.find("no formation named nope")) << err;
  err = olga_->ErrorOf("select pgfleet.formation_done('web')");
  EXPECT_NE(std::string::npos, err.find("no formation named web")) << "deleted: " << err;
  for (const char* other : {"default", "agent"}) {
    err = olga_->ErrorOf("select pgfleet.formation_done($1)", std::string(other));
    EXPECT_NE(std::string::npos, err.find("only a sysbatch formation can be marked done"))
        << other << ": " << err;
  }
  // alice neither owns it nor is an operator.
  err = alice_->ErrorOf("select pgfleet.formation_done('upgrade')");
  EXPECT_NE(std::string::npos,
            err.find("formation upgrade is owned by " + olga_login_ +
                     ": only its owner or a pgfleet_operator may mark it done (" + alice_login_ +
                     " is neither)"))
      << err;
  err = alice_->ErrorOf("select pgfleet.formation_done(null)");
  EXPECT_NE(std::string::npos, err.find("no formation named")) << err;
  // Nor may she set it behind the function's back.
  err = alice_->ErrorOf("update pgfleet.formations set done_at = now() where name = 'upgrade'");
  EXPECT_NE(std::string::npos, err.find("permission denied")) << err;
  EXPECT_EQ(before, Everything());
  EXPECT_EQ("", Status("done_at", "upgrade"));
}

TEST_F(SysbatchTest, ItsOwnerOrAnOperatorMarksItDoneOnceAndThenItMakesNoJob) {
  // An admin may name another owner: alice owns this one, olga the other.
  owner_.Exec(
      "insert into pgfleet.formations (name, kind, command, owner) "
      "values ('mine', 'sysbatch', '{true}', $1)",
      alice_login_);
  olga_->Exec(
      "insert into pgfleet.formations (name, kind, command) values ('upgrade', "
      "'sysbatch', '{true}')");
  std::string at = alice_->Str("select pgfleet.formation_done('mine')::text");
  EXPECT_FALSE(at.empty());
  EXPECT_EQ(at, alice_->Str("select pgfleet.formation_done('mine')::text"))
      << "done again: still when it was first marked";
  EXPECT_EQ(at, Status("done_at", "mine"));

  owner_.RegisterHost("h1", 4000, 4000);
  EXPECT_FALSE(olga_->Str("select pgfleet.formation_done('upgrade')::text").empty());
  EXPECT_EQ("0", owner_.Str("select pgfleet.insert_replicas(id, 'sysbatch', array['h1']) "
                            "from pgfleet.formations where name = 'upgrade'"))
      << "done: no job, whatever the caller read before";
  EXPECT_EQ(0, owner_.Num("select count(*) from pgfleet.jobs where formation = 'upgrade'"));
}

TEST_F(SysbatchTest, ItsJobsArePinnedCarryMaxAttemptsAndCountInFormationStatus) {
  for (const char* h : {"h1", "h2", "h3"}) owner_.RegisterHost(h, 4000, 4000);
  // The schema's owner is privileged: its formation may run on process hosts.
  owner_.Exec(
      "insert into pgfleet.formations (name, kind, command, max_attempts) "
      "values ('upgrade', 'sysbatch', '{true}', 3)");
  EXPECT_EQ("sysbatch", Status("kind", "upgrade"));
  EXPECT_EQ("3", Status("desired", "upgrade")) << "every eligible host, none run yet";
  EXPECT_EQ("2", owner_.Str("select pgfleet.insert_replicas(id, 'sysbatch', array['h1', 'h2']) "
                            "from pgfleet.formations where name = 'upgrade'"));
  EXPECT_EQ("h1 3 pending,h2 3 pending",
            owner_.Str("select string_agg(pinned_host || ' ' || max_attempts || ' ' || state, ','"
                       " order by pinned_host) from pgfleet.jobs where formation = 'upgrade'"));
  EXPECT_EQ("3", Status("desired", "upgrade")) << "h1 and h2 have theirs, h3 waits for one";
  // h3 drains: no longer eligible; h1 and h2 still count (they have theirs).
  owner_.Exec("select pgfleet.drain('h3', interval '1 hour')");
  EXPECT_EQ("2", Status("desired", "upgrade"));
  owner_.Exec("select pgfleet.set_host_state('h3', 'up')");
  owner_.Exec("select pgfleet.formation_done('upgrade')");
  EXPECT_EQ("2", Status("desired", "upgrade")) << "done: only the hosts it ran on";
  EXPECT_EQ("2", Status("pending", "upgrade"));
  // A submitter reads the same view (it counts every owner's jobs).
  EXPECT_EQ("2", alice_->Str("select desired::text from pgfleet.formation_status "
                             "where name = 'upgrade'"));
}

}  // namespace
}  // namespace pgfleet::integration
