// Retiring formations and hosts (the first hour issue, item 10):
// pgfleet.delete_formation and pgfleet.remove_host, as an operator and as a
// submitter, against the real server.

#include <gtest/gtest.h>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    op_ = std::make_unique<Sql>(db_.DsnAs(db_.CreateLogin("olga", {"pgfleet_operator"})));
    alice_ = std::make_unique<Sql>(db_.DsnAs(db_.CreateLogin("alice", {"pgfleet_submitter"})));
  }
  TestDatabase db_;
  Sql owner_{db_};
  std::unique_ptr<Sql> op_, alice_;
};

TEST_F(LifecycleTest, DeletingAFormationStopsItsJobsKeepsTheirHistoryAndRefusesNewOnes) {
  long long gen = owner_.RegisterHost("h1", 4000, 4000);
  owner_.Exec("insert into pgfleet.formations (name) values ('web')");  // batch
  long long done = owner_.Num(
      "insert into pgfleet.jobs (formation, command) values ('web', array['true']) returning id");
  ASSERT_EQ(owner_.Assign({done}, "h1").size(), 1u);
  ASSERT_TRUE(owner_.ReportOne("h1", gen, Exited(done, 1, 0)));
  long long running = owner_.Num(
      "insert into pgfleet.jobs (formation, command) values ('web', array['sleep', '9']) "
      "returning id");
  ASSERT_EQ(owner_.Assign({running}, "h1").size(), 1u);
  ASSERT_TRUE(owner_.ReportOne("h1", gen, Running(running, 1)));
  long long pending = owner_.Num(
      "insert into pgfleet.jobs (formation, command) values ('web', array['true']) returning id");

  // Only operators.
  EXPECT_NE(std::string::npos, alice_->ErrorOf("select pgfleet.delete_formation('web')")
                                   .find("needs membership in pgfleet_operator"));
  EXPECT_NE(std::string::npos,
            op_->ErrorOf("select pgfleet.delete_formation('nope')").find("no formation named"));
  EXPECT_NE(std::string::npos,
            op_->ErrorOf("select pgfleet.delete_formation('default')").find("cannot be deleted"));

  EXPECT_EQ("deleted; 2 live jobs stopped, history kept",
            op_->Str("select pgfleet.delete_formation('web')"));
  EXPECT_EQ(owner_.State(pending), "cancelled");
  EXPECT_EQ("stop", owner_.Str("select desired_state from pgfleet.jobs where id = $1", running));
  EXPECT_EQ(owner_.State(done), "succeeded");  // history stays
  EXPECT_EQ(owner_.Num("select count(*) from pgfleet.formation_status where name = 'web'"), 0);
  EXPECT_EQ(owner_.Num("select replicas from pgfleet.formations where name = 'web'"), 0);
  // It takes no new jobs, saying how to get it back.
  std::string err = alice_->ErrorOf(
      "insert into pgfleet.jobs (formation, command) values ('web', array['true'])");
  EXPECT_NE(std::string::npos, err.find("formation \"web\" was deleted")) << err;
  EXPECT_NE(std::string::npos,
            op_->ErrorOf("select pgfleet.delete_formation('web')").find("no formation named"));

  // Once retention has pruned its jobs, its row goes too.
  ASSERT_TRUE(owner_.ReportOne("h1", gen, Exited(running, 1, 143)));
  owner_.Exec("update pgfleet.jobs set finished_at = now() - interval '30 days'");
  EXPECT_EQ(owner_.Num("select pgfleet.prune_deleted_formations()"), 0);  // jobs still there
  owner_.Exec("select pgfleet.prune_finished(interval '7 days', 1000)");
  EXPECT_EQ(owner_.Num("select pgfleet.prune_deleted_formations()"), 1);
  EXPECT_EQ(owner_.Num("select count(*) from pgfleet.formations where name = 'web'"), 0);

  // A formation without jobs is deleted outright.
  owner_.Exec("insert into pgfleet.formations (name) values ('empty')");
  EXPECT_EQ("deleted", op_->Str("select pgfleet.delete_formation('empty')"));
  EXPECT_EQ(owner_.Num("select count(*) from pgfleet.formations where name = 'empty'"), 0);
}

// A deleted formation's name is free for a plain INSERT at once (not only
// through `pgfleet formation create`), its jobs' history staying under it;
// a live formation's name is not.
TEST_F(LifecycleTest, APlainInsertCreatesADeletedFormationAnewAndItsHistoryStays) {
  long long gen = owner_.RegisterHost("h1", 4000, 4000);
  op_->Exec("insert into pgfleet.formations (name) values ('web')");
  const long long old_id = owner_.Num("select id from pgfleet.formations where name = 'web'");
  long long done = owner_.Num(
      "insert into pgfleet.jobs (formation, command) values ('web', array['true']) returning id");
  ASSERT_EQ(owner_.Assign({done}, "h1").size(), 1u);
  ASSERT_TRUE(owner_.ReportOne("h1", gen, Exited(done, 1, 0)));
  ASSERT_EQ("deleted; 0 live jobs stopped, history kept",
            op_->Str("select pgfleet.delete_formation('web')"));

  op_->Exec("insert into pgfleet.formations (name, max_attempts) values ('web', 2)");
  EXPECT_EQ(1, owner_.Num("select count(*) from pgfleet.formations where name = 'web'"));
  EXPECT_EQ("true 2 true", owner_.Str("select (deleted_at is null) || ' ' || max_attempts || ' ' || "
                                "(id = $1) from pgfleet.formations where name = 'web'",
                                old_id));
  EXPECT_EQ(owner_.State(done), "succeeded");  // history stays, under the name
  EXPECT_EQ("web", owner_.Str("select formation from pgfleet.jobs where id = $1", done));
  // It takes jobs again.
  EXPECT_GT(alice_->Num("insert into pgfleet.jobs (formation, command) values ('web', "
                        "array['true']) returning id"),
            done);
  // A live formation's name is refused, and nothing changes.
  std::string err = op_->ErrorOf("insert into pgfleet.formations (name) values ('web')");
  EXPECT_NE(std::string::npos, err.find("duplicate key")) << err;
  EXPECT_EQ(1, owner_.Num("select count(*) from pgfleet.formations where name = 'web'"));
  // A submitter cannot create formations, deleted names or not.
  ASSERT_EQ("deleted; 1 live jobs stopped, history kept",
            op_->Str("select pgfleet.delete_formation('web')"));
  err = alice_->ErrorOf("insert into pgfleet.formations (name) values ('web')");
  EXPECT_NE(std::string::npos, err.find("permission denied")) << err;
  EXPECT_EQ("f", owner_.Str("select (deleted_at is null)::text::char from pgfleet.formations "
                            "where name = 'web'"));
}

TEST_F(LifecycleTest, OnlyALostOrOfflineHostWithoutLiveJobsIsRemoved) {
  long long gen = owner_.RegisterHost("h1", 4000, 4000);
  long long job = owner_.Submit(100, 10);
  ASSERT_EQ(owner_.Assign({job}, "h1").size(), 1u);
  ASSERT_TRUE(owner_.ReportOne("h1", gen, Running(job, 1)));

  EXPECT_NE(std::string::npos, alice_->ErrorOf("select pgfleet.remove_host('h1')")
                                   .find("needs membership in pgfleet_operator"));
  EXPECT_NE(std::string::npos,
            op_->ErrorOf("select pgfleet.remove_host('h9')").find("host h9 does not exist"));
  std::string err = op_->ErrorOf("select pgfleet.remove_host('h1')");
  EXPECT_NE(std::string::npos, err.find("only a lost or offline host can be removed")) << err;
  op_->Exec("select pgfleet.set_host_state('h1', 'offline')");
  err = op_->ErrorOf("select pgfleet.remove_host('h1')");
  EXPECT_NE(std::string::npos, err.find("still has 1 live jobs")) << err;
  EXPECT_EQ(owner_.Num("select count(*) from pgfleet.hosts where id = 'h1'"), 1);

  ASSERT_TRUE(owner_.ReportOne("h1", gen, Exited(job, 1, 0)));
  EXPECT_EQ("", op_->ErrorOf("select pgfleet.remove_host('h1')"));
  EXPECT_EQ(owner_.Num("select count(*) from pgfleet.hosts where id = 'h1'"), 0);
  EXPECT_EQ(owner_.Num("select count(*) from pgfleet.host_heartbeats where host_id = 'h1'"), 0);
  // History keeps the host's id.
  EXPECT_EQ("h1", owner_.Str("select host_id from pgfleet.jobs where id = $1", job));
  EXPECT_GT(owner_.Num("select count(*) from pgfleet.job_events where host_id = 'h1'"), 0);
  // The same id registers afresh.
  EXPECT_GT(owner_.RegisterHost("h1", 4000, 4000), 0);
}

}  // namespace
}  // namespace pgfleet::integration
