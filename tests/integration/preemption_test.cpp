// Preemption against the real server (sql/024_preemption.sql): pgfleet.preempt
// checks again, under row locks, everything the scheduler's choice assumed,
// stops the victims with events naming the preempting job, respects the
// disruption budget (formations.min_available) even between two schedulers,
// and a preempted batch attempt comes back as a new attempt that does not
// count against max_attempts. Only schedulers may call it.

#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <string>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

class PreemptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sched_ = std::make_unique<Sql>(db_.DsnAs(db_.CreateLogin("sam", {"pgfleet_scheduler"})));
    alice_ = std::make_unique<Sql>(db_.DsnAs(db_.CreateLogin("alice", {"pgfleet_submitter"})));
    gen_ = owner_.RegisterHost("h1", 4000, 4000);
  }
  // A job of `priority` and as much memory as cpu (batch unless the
  // formation says otherwise), owned by the admin: above the priority
  // ceiling (setting max_priority) is allowed.
  long long Job(int cpu, int priority, const std::string& formation = "default") {
    return owner_.Num(
        "insert into pgfleet.jobs (formation, command, cpu, memory, priority) "
        "values ($1, array['sleep', '9'], $2, $3, $4) returning id",
        formation, cpu, cpu, priority);
  }
  // Assigned to h1 and running there.
  void Run(long long job, int attempt = 1) {
    ASSERT_EQ(owner_.Assign({job}, "h1").size(), 1u) << job;
    ASSERT_TRUE(owner_.ReportOne("h1", gen_, Running(job, attempt))) << job;
  }
  long long Preempt(long long job, const std::string& victims, const std::string& host = "h1") {
    return sched_->Num("select pgfleet.preempt($1, $2, $3::bigint[])", job, host, victims);
  }
  std::string Col(const std::string& col, long long job) {
    return owner_.Str("select " + col + "::text from pgfleet.jobs where id = $1", job);
  }
  std::string Ids(long long a, long long b) {
    return "{" + std::to_string(a) + "," + std::to_string(b) + "}";
  }

  TestDatabase db_;
  Sql owner_{db_};
  std::unique_ptr<Sql> sched_, alice_;
  long long gen_ = 0;
};

TEST_F(PreemptionTest, VictimsStopNameTheirPreemptorAndComeBackAsANewAttemptNotCountedAsFailed) {
  long long v[4];
  for (auto& j : v) {
    j = Job(1000, 10);  // max_attempts 1
    Run(j);
  }
  const long long p = Job(2000, 90);
  EXPECT_EQ(2, Preempt(p, Ids(v[0], v[1])));

  EXPECT_EQ("stop", Col("desired_state", v[0]));
  EXPECT_EQ(std::to_string(p), Col("preempted_by", v[0]));
  EXPECT_EQ("run", Col("desired_state", v[2]));
  EXPECT_EQ(Ids(v[0], v[1]), Col("preempting", p));
  EXPECT_EQ("waiting for 2 preempted jobs to stop on host h1 (" + std::to_string(v[0]) + ", " +
                std::to_string(v[1]) + ")",
            Col("error", p));
  EXPECT_EQ("preempted by job " + std::to_string(p) + " (priority 90) to make room on host h1",
            owner_.Str("select detail from pgfleet.job_events where job_id = $1 "
                       "and kind = 'stop_requested'",
                       v[0]));
  EXPECT_EQ(1, owner_.Events(p, "preempting"));
  EXPECT_EQ(2, owner_.Num("select count(*) from pgfleet.preemptions where for_job = $1", p));

  // Not again while its victims stop, not even others.
  EXPECT_EQ(0, Preempt(p, Ids(v[2], v[3])));
  EXPECT_EQ("run", Col("desired_state", v[2]));

  // The victim's attempt ends (SIGTERM): pending again at once, no failure
  // counted, the event naming the preemptor; the next attempt runs to success.
  ASSERT_TRUE(owner_.ReportOne("h1", gen_, Exited(v[0], 1, 143)));
  EXPECT_EQ("pending", owner_.State(v[0]));
  EXPECT_EQ("0", Col("failures", v[0]));
  EXPECT_EQ("run", Col("desired_state", v[0]));
  EXPECT_EQ("", Col("preempted_by", v[0]));
  EXPECT_EQ("", Col("not_before", v[0]));
  const std::string requeued = owner_.Str(
      "select detail from pgfleet.job_events where job_id = $1 and kind = 'requeued'", v[0]);
  EXPECT_NE(std::string::npos, requeued.find("preempted by job " + std::to_string(p))) << requeued;
  EXPECT_NE(std::string::npos, requeued.find("not counted against max_attempts")) << requeued;
  EXPECT_EQ("3000/3000", owner_.Allocated("h1"));
  Run(v[0], 2);
  ASSERT_TRUE(owner_.ReportOne("h1", gen_, Exited(v[0], 2, 0)));
  EXPECT_EQ("succeeded", owner_.State(v[0]));
  EXPECT_EQ(1, owner_.Num("select count(*) from pgfleet.preemptions where for_job = $1", p));

  // Once both have stopped, the preemptor has its room.
  ASSERT_TRUE(owner_.ReportOne("h1", gen_, Exited(v[1], 1, 143)));
  EXPECT_EQ(1u, owner_.Assign({p}, "h1").size());
  EXPECT_EQ(0, owner_.Drift());
}

TEST_F(PreemptionTest, RefusesAndChangesNothingWhenAVictimNoLongerQualifies) {
  const long long equal = Job(1000, 90);
  const long long higher = Job(1000, 95);
  const long long fixed = owner_.Num(
      "insert into pgfleet.jobs (command, cpu, memory, priority, preemptible) "
      "values (array['sleep', '9'], 1000, 1000, 10, false) returning id");
  const long long low = Job(1000, 10);
  for (long long j : {equal, higher, fixed, low}) Run(j);
  const long long pending_low = Job(100, 10);
  const long long p = Job(1000, 90);
  const std::string before = owner_.Str(
      "select string_agg(id || desired_state || coalesce(preempted_by, 0), ',' order by id) "
      "from pgfleet.jobs");

  EXPECT_EQ(0, Preempt(p, "{" + std::to_string(equal) + "}"));        // equal priority
  EXPECT_EQ(0, Preempt(p, "{" + std::to_string(higher) + "}"));       // higher priority
  EXPECT_EQ(0, Preempt(p, "{" + std::to_string(fixed) + "}"));        // not preemptible
  EXPECT_EQ(0, Preempt(p, "{" + std::to_string(pending_low) + "}"));  // not running
  EXPECT_EQ(0, Preempt(p, Ids(low, equal)));                          // all or none
  EXPECT_EQ(0, Preempt(p, "{" + std::to_string(low) + "}", "h2"));    // not on that host
  EXPECT_EQ(0, Preempt(p, "{999999}"));                               // no such job
  const long long big = Job(3000, 90);                                // 1000 would not be enough
  EXPECT_EQ(0, Preempt(big, "{" + std::to_string(low) + "}"));
  EXPECT_EQ(0, Preempt(equal, "{" + std::to_string(low) + "}"));  // the preemptor is not pending
  owner_.Exec("select pgfleet.drain('h1', null)");
  EXPECT_EQ(0, Preempt(p, "{" + std::to_string(low) + "}"));  // the host takes no work
  EXPECT_EQ(before, owner_.Str("select string_agg(id || desired_state || coalesce(preempted_by, "
                               "0), ',' order by id) from pgfleet.jobs where id <= $1",
                               p));
  EXPECT_EQ(0, owner_.Num("select count(*) from pgfleet.job_events where kind = 'preempting'"));
}

TEST_F(PreemptionTest, OnlySchedulersMayPreemptAndBadArgumentsAreRefusedByName) {
  const long long low = Job(1000, 10);
  Run(low);
  // Of higher priority than low, yet within a submitter's ceiling (max_priority 50).
  const long long mine = alice_->Num(
      "insert into pgfleet.jobs (command, cpu, memory, priority) values (array['true'], 4000, "
      "4000, 50) returning id");
  std::string err = alice_->ErrorOf("select pgfleet.preempt($1, 'h1', $2::bigint[])", mine,
                                    "{" + std::to_string(low) + "}");
  EXPECT_NE(std::string::npos, err.find("needs membership in pgfleet_scheduler")) << err;
  EXPECT_EQ("run", Col("desired_state", low));

  for (const std::string& bad : {std::string("{}"), std::string("{1,null}")}) {
    err = sched_->ErrorOf("select pgfleet.preempt($1, 'h1', $2::bigint[])", mine, bad);
    EXPECT_NE(std::string::npos, err.find("1 to 64 victim job ids")) << bad << ": " << err;
  }
  err = sched_->ErrorOf(
      "select pgfleet.preempt($1, 'h1', array(select generate_series(1, 65))::bigint[])", mine);
  EXPECT_NE(std::string::npos, err.find("1 to 64 victim job ids")) << err;
  err = sched_->ErrorOf("select pgfleet.preempt(null, 'h1', '{1}')");
  EXPECT_NE(std::string::npos, err.find("1 to 64 victim job ids")) << err;
  err = sched_->ErrorOf("select pgfleet.preempt($1, 'h1', $2::bigint[])", mine,
                        "{" + std::to_string(mine) + "}");
  EXPECT_NE(std::string::npos, err.find("cannot preempt itself")) << err;

  // What pgfleet sets cannot be set at insert.
  for (const std::string& col : {std::string("preempted_by"), std::string("preempting")}) {
    const std::string value = col == "preempted_by" ? "1" : "'{1}'";
    err = alice_->ErrorOf("insert into pgfleet.jobs (command, " + col +
                          ") values (array['true'], " + value + ")");
    EXPECT_NE(std::string::npos, err.find(col + " is set by pgfleet")) << err;
  }
  err = alice_->ErrorOf(
      "insert into pgfleet.jobs (command, preemptible) values (array['true'], 'maybe')");
  EXPECT_NE(std::string::npos, err.find("boolean")) << err;
}

class BudgetTest : public PreemptionTest {
 protected:
  // Service web: 3 running replicas of priority 10 (preemptible as asked),
  // at least `min_available` of them kept.
  void Web(const std::string& min_available, const std::string& preemptible = "true") {
    owner_.Exec(
        "insert into pgfleet.formations (name, kind, replicas, command, cpu, memory, priority, "
        "min_available, preemptible) values ('web', 'service', 3, array['sleep', '99'], 1000, "
        "1000, 10, " +
        min_available + ", " + preemptible + ")");
    owner_.Exec(
        "select pgfleet.create_replicas((select id from pgfleet.formations where name = 'web'), "
        "3)");
    for (long long r : Replicas()) Run(r);
  }
  std::vector<long long> Replicas() {
    std::vector<long long> out;
    for (const auto& row : owner_.Exec("select id from pgfleet.jobs where formation = 'web' and "
                                       "state in ('pending', 'assigned', 'running') order by id"))
      out.push_back(row[0].as<long long>());
    return out;
  }
};

TEST_F(BudgetTest, AServiceIsNeverPreemptedBelowMinAvailableAndItsVictimIsReplaced) {
  Web("2");
  auto r = Replicas();
  ASSERT_EQ(3u, r.size());
  const long long p1 = Job(1000, 90);
  const long long p2 = Job(1000, 90);
  EXPECT_EQ(0, Preempt(p1, Ids(r[0], r[1])));  // would leave 1 of 3
  EXPECT_EQ(1, Preempt(p1, "{" + std::to_string(r[0]) + "}"));
  EXPECT_EQ(0, Preempt(p2, "{" + std::to_string(r[1]) + "}"));  // 2 left: none to spare
  EXPECT_EQ("run", Col("desired_state", r[1]));
  // The replica's attempt ends cancelled, saying why; its formation replaces it.
  ASSERT_TRUE(owner_.ReportOne("h1", gen_, Exited(r[0], 1, 143)));
  EXPECT_EQ("cancelled", owner_.State(r[0]));
  const std::string error = Col("error", r[0]);
  EXPECT_NE(std::string::npos, error.find("preempted by job " + std::to_string(p1))) << error;
  EXPECT_NE(std::string::npos, error.find("its formation replaces it")) << error;
}

TEST_F(BudgetTest, TwoSchedulersCannotBothTakeTheLastSpareReplica) {
  Web("2");
  auto r = Replicas();
  const long long p1 = Job(1000, 90);
  const long long p2 = Job(1000, 90);
  Sql other(db_.DsnAs(db_.CreateLogin("tom", {"pgfleet_scheduler"})));
  auto conn = db_.Connect();
  pqxx::work a(*conn);  // scheduler A, its transaction open
  EXPECT_EQ(1, a.exec1("select pgfleet.preempt(" + std::to_string(p1) + ", 'h1', '{" +
                       std::to_string(r[0]) + "}')")[0]
                   .as<int>());
  // B, meanwhile, for another replica of web: refused at once, not waiting.
  EXPECT_EQ(0, Preempt(p2, "{" + std::to_string(r[1]) + "}"));
  a.commit();
  EXPECT_EQ(0, Preempt(p2, "{" + std::to_string(r[1]) + "}"));  // and after: no spare left
  EXPECT_EQ(1, owner_.Num("select count(*) from pgfleet.jobs where formation = 'web' "
                          "and desired_state = 'stop'"));
}

TEST_F(BudgetTest, ReplicasAreNotPreemptibleUnlessTheirFormationSaysSo) {
  Web("null", "null");
  auto r = Replicas();
  EXPECT_EQ("false", Col("preemptible", r[0]));
  const long long p = Job(1000, 90);
  EXPECT_EQ(0, Preempt(p, "{" + std::to_string(r[0]) + "}"));
  // Changed on the formation: its live replicas follow.
  owner_.Exec("select pgfleet.update_formation('web', '{\"preemptible\": true}')");
  EXPECT_EQ("true", Col("preemptible", r[0]));
  EXPECT_EQ(1, Preempt(p, "{" + std::to_string(r[0]) + "}"));  // no budget: null
}

// Deleting a formation with a budget drops the budget with its replicas
// (min_available <= replicas would otherwise refuse the delete).
TEST_F(BudgetTest, AFormationWithABudgetCanBeDeleted) {
  Web("2");
  EXPECT_EQ("deleted; 3 live jobs stopped, history kept",
            owner_.Str("select pgfleet.delete_formation('web')"));
  EXPECT_EQ("", owner_.Str("select coalesce(min_available::text, '') from pgfleet.formations "
                           "where name = 'web'"));
}

TEST_F(BudgetTest, MinAvailableOutOfRangeIsRefusedNamingTheRule) {
  Web("2");
  std::string err = owner_.ErrorOf("update pgfleet.formations set min_available = -1");
  EXPECT_NE(std::string::npos, err.find("min_available must be >= 0")) << err;
  err = owner_.ErrorOf("update pgfleet.formations set min_available = 4 where name = 'web'");
  EXPECT_NE(std::string::npos, err.find("min_available must be <= replicas")) << err;
  err = owner_.ErrorOf("select pgfleet.update_formation('web', '{\"replicas\": 1}')");
  EXPECT_NE(std::string::npos, err.find("min_available must be <= replicas")) << err;
  err = owner_.ErrorOf("select pgfleet.update_formation('web', '{\"min_available\": \"x\"}')");
  EXPECT_NE(std::string::npos, err.find("min_available")) << err;
  err =
      owner_.ErrorOf("select pgfleet.update_formation('web', '{\"min_available\": 99999999999}')");
  EXPECT_NE(std::string::npos, err.find("min_available")) << err;
  EXPECT_EQ("2", owner_.Str("select min_available from pgfleet.formations where name = 'web'"));
  // A submitter cannot change formations at all.
  err = alice_->ErrorOf("update pgfleet.formations set min_available = 0");
  EXPECT_NE(std::string::npos, err.find("permission denied")) << err;
}

}  // namespace
}  // namespace pgfleet::integration
