// Dependencies by plain INSERT (jobs.after; sql/024_dependencies.sql)
// against the real server: a DAG inserted in one transaction waits out of
// the scheduler's reach and is released in order as jobs succeed; a failure,
// a cancel or a delete fails the jobs after it, transitively, naming it;
// every rule of the list is refused with a message naming it and changes
// nothing, including for another owner's ids (one message whether they exist
// or not); the view and pgfleet.job_dag show the DAG under row-level security.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/queries.h"
#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

class Dependencies : public ::testing::Test {
 protected:
  void SetUp() override { gen_ = sql_.RegisterHost("h1", 8000, 8000); }

  // A job after `after` ("" for none: an array literal's contents otherwise).
  long long Insert(Sql& as, const std::string& after = "", int max_attempts = 1) {
    return as.Num(
        "insert into pgfleet.jobs (command, after, max_attempts) "
        "values (array['true'], nullif($1, '')::bigint[], $2) returning id",
        after.empty() ? "" : "{" + after + "}", max_attempts);
  }
  // A column, or an expression of the row (parenthesized: the cast is the whole's).
  std::string Col(long long job, const std::string& column) {
    return sql_.Str("select (" + column + ")::text from pgfleet.jobs where id = $1", job);
  }
  bool Waiting(long long job) {
    return Col(job, "state") == "pending" && Col(job, "not_before") == "infinity";
  }
  // Runs a job to its end on h1 with this exit code.
  void Run(long long job, int exit_code) {
    auto a = sql_.Assign({job}, "h1");
    ASSERT_EQ(a.size(), 1u) << "job " << job << " was not placeable";
    ASSERT_TRUE(sql_.ReportOne("h1", gen_, Running(job, a[0].attempt)));
    ASSERT_TRUE(sql_.ReportOne("h1", gen_, Exited(job, a[0].attempt, exit_code)));
  }
  long long Edges() { return sql_.Num("select count(*) from pgfleet.job_dependencies"); }
  // Every job and edge, to show a refused insert changed nothing.
  std::string Everything() {
    return sql_.Str(
        "select md5(coalesce((select string_agg(j::text, '|' order by id) from pgfleet.jobs j), '')"
        " || coalesce((select string_agg(d::text, '|' order by needs, job_id)"
        "              from pgfleet.job_dependencies d), ''))");
  }

  TestDatabase db_;
  Sql sql_{db_};
  long long gen_ = 0;
};

TEST_F(Dependencies, ADiamondInOneTransactionWaitsAndIsReleasedInOrder) {
  long long a, b, c, d;
  {
    auto conn = db_.Connect();
    pqxx::work tx(*conn);
    auto id = [&tx](const std::string& after) {
      return tx
          .exec_params1(
              "insert into pgfleet.jobs (command, after) values (array['true'], "
              "nullif($1, '')::bigint[]) returning id",
              after)[0]
          .as<long long>();
    };
    a = id("");
    b = id("{" + std::to_string(a) + "}");
    c = id("{" + std::to_string(a) + "}");
    d = id("{" + std::to_string(b) + "," + std::to_string(c) + "}");
    tx.commit();
  }
  EXPECT_EQ(Col(a, "not_before"), "");
  EXPECT_TRUE(Waiting(b) && Waiting(c) && Waiting(d));
  EXPECT_EQ(Col(b, "error"), "waiting for job " + std::to_string(a));
  EXPECT_EQ(Col(d, "error"), "waiting for jobs " + std::to_string(b) + ", " + std::to_string(c));
  EXPECT_EQ(Edges(), 4);
  // Out of the scheduler's reach: neither ready (no not_before) nor due.
  EXPECT_EQ(sql_.Num("select count(*) from pgfleet.jobs where state = 'pending' and "
                     "(not_before is null or not_before <= now())"),
            1);
  EXPECT_EQ(sql_.Str("select coalesce(pgfleet.next_retry_in()::text, 'none')"), "none");
  EXPECT_TRUE(sql_.Assign({b, c, d}, "h1").empty());  // a plan naming them anyway

  Run(a, 0);
  EXPECT_FALSE(Waiting(b) || Waiting(c));
  EXPECT_EQ(Col(b, "error") + Col(b, "not_before"), "");
  EXPECT_EQ(sql_.Events(b, "released"), 1);
  EXPECT_TRUE(Waiting(d));
  Run(b, 0);
  EXPECT_EQ(Col(d, "error"), "waiting for job " + std::to_string(c));
  EXPECT_TRUE(Waiting(d));
  Run(c, 0);
  EXPECT_FALSE(Waiting(d));
  EXPECT_EQ(Edges(), 0);
  Run(d, 0);
  EXPECT_EQ(sql_.State(d), "succeeded");
}

TEST_F(Dependencies, AFailureFailsTheJobsAfterItTransitivelyNamingIt) {
  long long a = Insert(sql_);
  long long b = Insert(sql_, std::to_string(a));
  long long c = Insert(sql_, std::to_string(b));
  long long other = Insert(sql_);
  long long e = Insert(sql_, std::to_string(other) + "," + std::to_string(a));
  Run(a, 3);
  EXPECT_EQ(sql_.State(b), "failed");
  EXPECT_EQ(Col(b, "error"), "dependency job " + std::to_string(a) + " failed: exit code 3");
  EXPECT_EQ(sql_.State(c), "failed");
  EXPECT_EQ(Col(c, "error"), "dependency job " + std::to_string(b) + " failed: dependency job " +
                                 std::to_string(a) + " failed: exit code 3");
  EXPECT_EQ(Col(c, "finished_at is not null"), "true");
  EXPECT_EQ(sql_.Events(c, "failed"), 1);
  EXPECT_EQ(sql_.State(e), "failed");  // one failed need is enough
  EXPECT_EQ(Edges(), 0);
  // The job that was not after the failure is untouched.
  EXPECT_EQ(sql_.State(other), "pending");
  EXPECT_EQ(Col(other, "error"), "");
}

TEST_F(Dependencies, AFailedAttemptWithRetriesLeftDoesNotFailTheJobsAfterIt) {
  long long a = Insert(sql_, "", 2);
  long long b = Insert(sql_, std::to_string(a));
  Run(a, 1);
  EXPECT_EQ(sql_.State(a), "pending");  // retried with backoff
  EXPECT_TRUE(Waiting(b));
  sql_.Exec("update pgfleet.jobs set not_before = null where id = $1", a);
  Run(a, 0);
  EXPECT_FALSE(Waiting(b));
  EXPECT_EQ(sql_.State(b), "pending");
}

TEST_F(Dependencies, ACancelledOrDeletedDependencyFailsTheJobAfterIt) {
  long long a = Insert(sql_);
  long long b = Insert(sql_, std::to_string(a));
  EXPECT_EQ(sql_.Str("select pgfleet.cancel($1)", a), "cancelled");
  EXPECT_EQ(sql_.State(b), "failed");
  EXPECT_EQ(Col(b, "error"),
            "dependency job " + std::to_string(a) + " was cancelled: cancelled by user");

  long long x = Insert(sql_);
  long long y = Insert(sql_, std::to_string(x));
  sql_.Exec("delete from pgfleet.jobs where id = $1", x);
  EXPECT_EQ(sql_.State(y), "failed");
  EXPECT_EQ(Col(y, "error"), "dependency job " + std::to_string(x) + " was deleted");
  EXPECT_EQ(Edges(), 0);
  // A waiting job cancelled or deleted takes its edges with it.
  long long p = Insert(sql_);
  long long q = Insert(sql_, std::to_string(p));
  long long r = Insert(sql_, std::to_string(p));
  sql_.Exec("select pgfleet.cancel($1)", q);
  sql_.Exec("delete from pgfleet.jobs where id = $1", r);
  EXPECT_EQ(Edges(), 0);
  EXPECT_EQ(sql_.State(q), "cancelled");
}

TEST_F(Dependencies, AJobAfterSucceededJobsIsPlaceableAtOnceAndAfterAFailedOneIsRefused) {
  long long a = Insert(sql_);
  Run(a, 0);
  long long b = Insert(sql_, std::to_string(a));
  EXPECT_EQ(Col(b, "not_before") + Col(b, "error"), "");
  EXPECT_EQ(Edges(), 0);
  long long f = Insert(sql_);
  Run(f, 1);
  std::string before = Everything();
  std::string err = sql_.ErrorOf(
      "insert into pgfleet.jobs (command, after) values (array['true'], array[$1::bigint])", f);
  EXPECT_NE(err.find("after names job " + std::to_string(f) +
                     ", which already failed: a job after it could never run"),
            std::string::npos)
      << err;
  EXPECT_EQ(before, Everything());
}

TEST_F(Dependencies, EveryRuleOfTheListIsRefusedNamingItAndChangesNothing) {
  long long a = Insert(sql_);
  std::string sa = std::to_string(a);
  std::string hundred_one = "1";
  for (int i = 2; i <= 101; ++i) hundred_one += "," + std::to_string(i);
  struct Case {
    std::string after, words;
  };
  for (const Case& c : std::vector<Case>{
           {"'{" + sa + "," + sa + "}'", "after lists job " + sa + " twice"},
           {"'{" + sa + ",null}'", "after must not contain null"},
           {"'{" + hundred_one + "}'", "after must list at most 100 jobs"},
           {"'{{" + sa + "},{" + sa + "}}'", "after must be a one-dimensional array"},
           {"'{0}'", "after must list job ids > 0"},
           {"'{-5}'", "after must list job ids > 0"},
           {"'{9223372036854775807}'", "which does not exist or which"},
           {"'{" + std::to_string(a + 1000) + "}'", "which does not exist or which"},
           {"'" + sa + "'", "malformed array literal"},
           {"'{abc}'", "invalid input syntax for type bigint"},
       }) {
    std::string before = Everything();
    for (const char* shape :
         {"values (array['true'], %s)", "values (array['true'], null), (array['true'], %s)"}) {
      std::string values(shape);
      values.replace(values.find("%s"), 2, c.after + "::bigint[]");
      std::string err =
          sql_.ErrorOf("insert into pgfleet.jobs (command, after) " + values + " returning id");
      EXPECT_NE(err.find(c.words), std::string::npos) << c.after << ": " << err;
    }
    EXPECT_EQ(before, Everything()) << c.after;
  }
  // The job itself (its id guessed: the next of the identity), and a later one.
  long long next =
      sql_.Num("select last_value + 1 from pg_sequences where sequencename like 'jobs_id_seq%'");
  std::string err = sql_.ErrorOf(
      "insert into pgfleet.jobs (command, after) values (array['true'], array[$1::bigint])", next);
  EXPECT_NE(err.find("after must not name the job itself"), std::string::npos) << err;
  // A later job: its id above the identity's (as a transaction that took
  // a smaller id and committed later would find it).
  long long later = sql_.Num(
      "insert into pgfleet.jobs (id, command) overriding system value "
      "values (1000000, array['true']) returning id");
  err = sql_.ErrorOf(
      "insert into pgfleet.jobs (command, after) values (array['true'], array[$1::bigint])", later);
  EXPECT_NE(err.find("a job may only name jobs inserted before it"), std::string::npos) << err;
  // An empty list is none.
  long long none = Insert(sql_, " ");
  EXPECT_EQ(Col(none, "after") + Col(none, "not_before"), "");
  // A row with after cannot smuggle in an error of its own.
  long long own = sql_.Num(
      "insert into pgfleet.jobs (command, after, error) values (array['true'], array[$1::bigint], "
      "'fake') returning id",
      a);
  EXPECT_EQ(Col(own, "error"), "waiting for job " + sa);
  long long empty = sql_.Num(
      "insert into pgfleet.jobs (command, after, error) values (array['true'], '{}', 'fake') "
      "returning id");
  EXPECT_EQ(Col(empty, "error") + Col(empty, "after"), "");
}

TEST_F(Dependencies, AnotherOwnersJobIsRefusedAsIfItDidNotExist) {
  std::string alice_login = db_.CreateLogin("alice", {"pgfleet_submitter"});
  std::string bob_login = db_.CreateLogin("bob", {"pgfleet_submitter"});
  Sql alice(db_.DsnAs(alice_login));
  Sql bob(db_.DsnAs(bob_login));
  long long hers = Insert(alice);
  long long missing = hers + 1000;
  std::string before = Everything();
  auto refusal = [&bob](long long id) {
    std::string err = bob.ErrorOf(
        "insert into pgfleet.jobs (command, after) values (array['true'], array[$1::bigint])", id);
    err = err.substr(0, err.find('\n'));  // (its DETAIL names the new job's own id)
    // The id named, not its digits elsewhere (the login has digits too).
    std::string named = "job " + std::to_string(id) + ",";
    size_t at = err.find(named);
    if (at != std::string::npos) err.replace(at, named.size(), "job N,");
    return err;
  };
  std::string hidden = refusal(hers);
  EXPECT_NE(
      hidden.find("after names job N, which does not exist or which " + bob_login + " cannot see"),
      std::string::npos)
      << hidden;
  EXPECT_EQ(hidden, refusal(missing));  // nothing tells them apart
  EXPECT_EQ(before, Everything());
  // Her own DAG is hers to make; an operator may name anyone's.
  long long mine = Insert(alice, std::to_string(hers));
  EXPECT_TRUE(Waiting(mine));
  Sql olga(db_.DsnAs(db_.CreateLogin("olga", {"pgfleet_operator"})));
  EXPECT_TRUE(Waiting(Insert(olga, std::to_string(hers))));
}

TEST_F(Dependencies, AfterCannotBeUpdated) {
  long long a = Insert(sql_);
  long long b = Insert(sql_, std::to_string(a));
  std::string err = sql_.ErrorOf("update pgfleet.jobs set after = null where id = $1", b);
  EXPECT_NE(err.find("after is set at insert only"), std::string::npos) << err;
  err = sql_.ErrorOf("update pgfleet.jobs set after = array[$1::bigint] where id = $1", a);
  EXPECT_NE(err.find("after is set at insert only"), std::string::npos) << err;
  // Submitters may not update jobs at all.
  Sql alice(db_.DsnAs(db_.CreateLogin("alice", {"pgfleet_submitter"})));
  long long hers = Insert(alice);
  err = alice.ErrorOf("update pgfleet.jobs set after = null where id = $1", hers);
  EXPECT_NE(err.find("permission denied"), std::string::npos) << err;
}

TEST_F(Dependencies, TheSweepSettlesWhatAnExitPathMissedAndAHeldJobIsSkipped) {
  long long a = Insert(sql_);
  long long b = Insert(sql_, std::to_string(a));
  // Held by another transaction when a succeeds: left waiting, not waited for.
  auto holder = db_.Connect();
  {
    pqxx::work hold(*holder);
    hold.exec_params("select 1 from pgfleet.jobs where id = $1 for update", b);
    Run(a, 0);
    EXPECT_TRUE(Waiting(b));
  }
  EXPECT_EQ(sql_.Num("select pgfleet.settle_all_dependents()"), 1);
  EXPECT_FALSE(Waiting(b));
  // A state written by hand, past every exit path.
  long long c = Insert(sql_);
  long long d = Insert(sql_, std::to_string(c));
  auto x = sql_.Assign({c}, "h1");
  ASSERT_EQ(x.size(), 1u);
  sql_.Exec("update pgfleet.jobs set state = 'failed', finished_at = now() where id = $1", c);
  EXPECT_TRUE(Waiting(d));
  EXPECT_EQ(sql_.Num("select pgfleet.settle_all_dependents()"), 1);
  EXPECT_EQ(sql_.State(d), "failed");
  EXPECT_EQ(sql_.Num("select pgfleet.settle_all_dependents()"), 0);  // nothing waits
}

TEST_F(Dependencies, TheGraphAndTheDagShowOnlyWhatTheCallerMaySee) {
  std::string alice_login = db_.CreateLogin("alice", {"pgfleet_submitter"});
  Sql alice(db_.DsnAs(alice_login));
  Sql bob(db_.DsnAs(db_.CreateLogin("bob", {"pgfleet_submitter"})));
  long long a = Insert(alice);
  long long b = Insert(alice, std::to_string(a));
  long long c = Insert(alice, std::to_string(a));
  long long d = Insert(alice, std::to_string(b) + "," + std::to_string(c));
  EXPECT_EQ(alice.Str("select string_agg(job || '>' || needs || ':' || needs_state || ':' || "
                      "waiting, ' ' order by job, position) from pgfleet.job_graph"),
            std::to_string(b) + ">" + std::to_string(a) + ":pending:true " + std::to_string(c) +
                ">" + std::to_string(a) + ":pending:true " + std::to_string(d) + ">" +
                std::to_string(b) + ":pending:true " + std::to_string(d) + ">" + std::to_string(c) +
                ":pending:true");
  EXPECT_EQ(alice.Str("select string_agg(job || '@' || depth, ' ' order by job) "
                      "from pgfleet.job_dag($1)",
                      d),
            std::to_string(a) + "@2 " + std::to_string(b) + "@1 " + std::to_string(c) + "@1 " +
                std::to_string(d) + "@0");
  EXPECT_EQ(bob.Num("select count(*) from pgfleet.job_graph"), 0);
  EXPECT_EQ(bob.Num("select count(*) from pgfleet.job_dag($1)", d), 0);
  Sql rita(db_.DsnAs(db_.CreateLogin("rita", {"pgfleet_reader"})));
  EXPECT_EQ(rita.Num("select count(*) from pgfleet.job_graph"), 4);
}

TEST_F(Dependencies, SubmitTakesAfterAndADelayedStart) {
  long long a = sql_.Num("select pgfleet.submit(array['true'])");
  long long b = sql_.Num(
      "select pgfleet.submit(array['true'], after => array[$1::bigint], "
      "not_before => now() + interval '1 hour')",
      a);
  EXPECT_TRUE(Waiting(b));
  Run(a, 0);
  // Released to its own delayed start, not placeable before it.
  EXPECT_EQ(Col(b, "not_before > now() + interval '59 minutes'"), "true");
  EXPECT_EQ(sql_.Num("select count(*) from pgfleet.jobs where id = $1 and state = 'pending' and "
                     "(not_before is null or not_before <= now())",
                     b),
            0);
  EXPECT_GT(sql_.Num("select ceil(pgfleet.next_retry_in())::bigint"), 3500);
}

TEST_F(Dependencies, TheClisSubmitPassesAfterAndWhenAndReadsTimesAsPostgresDoes) {
  long long a = Insert(sql_);
  auto conn = db_.Connect();
  cli::PrepareQueries(*conn);
  model::JobSpec spec;
  spec.command = {"true"};
  spec.network = "none";
  int64_t b, c, d;
  {
    pqxx::work tx(*conn);
    b = cli::Submit(tx, spec, "", {{a}, "", 0});
    c = cli::Submit(tx, spec, "", {{}, "2030-01-02 03:04:05+00", 0});
    d = cli::Submit(tx, spec, "", {{}, "", 600});
    tx.commit();
  }
  EXPECT_TRUE(Waiting(b));
  EXPECT_EQ(Col(b, "after"), "{" + std::to_string(a) + "}");
  EXPECT_EQ(Col(c, "not_before = '2030-01-02 03:04:05+00'"), "true");
  EXPECT_EQ(Col(d, "not_before between now() + interval '590 s' and now() + interval '610 s'"),
            "true");
  pqxx::work tx(*conn);
  auto t = cli::ReadStartTime(tx, "2030-01-02T03:04:05Z");
  EXPECT_TRUE(t.finite);
  EXPECT_GT(t.seconds_from_now, 0);
  EXPECT_FALSE(cli::ReadStartTime(tx, "infinity").finite);
  EXPECT_THROW(cli::ReadStartTime(tx, "soon"), pqxx::data_exception);
}

}  // namespace
}  // namespace pgfleet::integration
