// Dependencies and delayed starts with real daemons (issue 38, items 2 and
// 8): a diamond DAG inserted in one transaction runs in order by the
// database's clock; a failing job fails the jobs after it, naming it, and
// `pgfleet wait` on the DAG's last job says so, while the other branch's
// result stands; `pgfleet run --after / --at / --in` submit such jobs, refuse
// bad values naming the flag and the rule, and `pgfleet ps` shows why a job
// waits and when a delayed one starts.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class DependenciesE2eTest : public OneHostClusterTest {
 protected:
  // Inserts the jobs in one transaction, each {command, indexes of the
  // earlier jobs it is after}; returns their ids.
  std::vector<std::string> InsertDag(
      const std::vector<std::pair<std::string, std::vector<int>>>& jobs) {
    auto conn = db_.Connect();
    pqxx::work tx(*conn);
    std::vector<std::string> ids;
    for (const auto& [command, after] : jobs) {
      std::string list;
      for (int i : after) list += (list.empty() ? "" : ",") + ids[i];
      ids.push_back(tx.exec_params1("insert into pgfleet.jobs (command, after) values "
                                    "(array['sh', '-c', $1], nullif($2, '{}')::bigint[]) "
                                    "returning id",
                                    command, "{" + list + "}")[0]
                        .as<std::string>());
    }
    tx.commit();
    return ids;
  }
  std::string Col(const std::string& job, const std::string& expr) {
    return db_.Scalar("select (" + expr + ")::text from pgfleet.jobs where id = " + job);
  }
  bool Final(const std::string& job) {
    std::string s = Col(job, "state");
    return s == "succeeded" || s == "failed" || s == "cancelled";
  }
  // Whether job a finished before job b started, by the database's clock.
  bool Before(const std::string& a, const std::string& b) {
    return db_.Scalar("select (select finished_at from pgfleet.jobs where id = " + a +
                      ") <= (select started_at from pgfleet.jobs where id = " + b + ")") == "t";
  }
  std::string Submit(std::vector<std::string> args) {
    auto r = cluster_->Cli(std::move(args));
    EXPECT_EQ(0, r.exit_code) << r.err;
    return util::Trim(r.out);
  }
};

TEST_F(DependenciesE2eTest, ADiamondInOneTransactionRunsInOrder) {
  auto ids = InsertDag({{"sleep 1", {}},     // A
                        {"sleep 1", {0}},    // B after A
                        {"sleep 0.5", {0}},  // C after A
                        {"true", {1, 2}}});  // D after B and C
  auto r = cluster_->Cli({"wait", ids[3]}, 90s);
  EXPECT_EQ(0, r.exit_code) << r.err << cluster_->Logs();
  for (const auto& id : ids) EXPECT_EQ("succeeded", Col(id, "state")) << id;
  EXPECT_TRUE(Before(ids[0], ids[1]));
  EXPECT_TRUE(Before(ids[0], ids[2]));
  EXPECT_TRUE(Before(ids[1], ids[3]));
  EXPECT_TRUE(Before(ids[2], ids[3]));
  // B and C both ran between A and D: each once.
  EXPECT_EQ(0, db_.AttemptsWithRepeated("running"));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_dependencies"));
}

TEST_F(DependenciesE2eTest, AFailingBranchFailsTheLastJobNamingItAndTheOtherBranchStands) {
  auto ids = InsertDag({{"true", {}},        // A
                        {"exit 3", {0}},     // B after A: fails
                        {"sleep 1", {0}},    // C after A
                        {"true", {1, 2}}});  // D after B and C
  auto r = cluster_->Cli({"wait", ids[3]}, 90s);
  EXPECT_EQ(1, r.exit_code) << r.err;
  std::string reason = "dependency job " + ids[1] + " failed: exit code 3";
  EXPECT_NE(std::string::npos, r.err.find("job " + ids[3] + ": failed: " + reason)) << r.err;
  EXPECT_EQ("failed", Col(ids[3], "state"));
  EXPECT_EQ(reason, Col(ids[3], "error"));
  EXPECT_EQ("", Col(ids[3], "started_at"));  // never ran
  ASSERT_TRUE(WaitFor([&] { return Final(ids[2]); }, 30s));
  EXPECT_EQ("succeeded", Col(ids[2], "state"));
  // The DAG's state is one query away.
  EXPECT_EQ(
      ids[0] + ":succeeded " + ids[1] + ":failed " + ids[2] + ":succeeded " + ids[3] + ":failed",
      db_.Scalar("select string_agg(job || ':' || state, ' ' order by job) "
                 "from pgfleet.job_dag(" +
                 ids[3] + ")"));
}

TEST_F(DependenciesE2eTest, RunAfterWaitsAndPsSaysForWhat) {
  std::string a = Submit({"run", "--", "sleep", "2"});
  std::string b = Submit({"run", "--after", a, "--", "true"});
  auto ps = cluster_->Cli({"ps"});
  EXPECT_EQ(0, ps.exit_code) << ps.err;
  EXPECT_NE(std::string::npos, ps.out.find("waiting for job " + a)) << ps.out;
  auto r = cluster_->Cli({"wait", b}, 60s);
  EXPECT_EQ(0, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("job " + b + ": pending: waiting for job " + a)) << r.err;
  EXPECT_TRUE(Before(a, b));
  // Several ids, by commas or repeated.
  std::string c = Submit({"run", "--after", a + "," + b, "--", "true"});
  std::string d = Submit({"run", "--after", a, "--after", b, "--", "true"});
  EXPECT_EQ("{" + a + "," + b + "}", Col(c, "after"));
  EXPECT_EQ("{" + a + "," + b + "}", Col(d, "after"));
}

TEST_F(DependenciesE2eTest, ADelayedJobDoesNotRunBeforeItsTimeAndRunsAfter) {
  std::string id = Submit({"run", "--in", "3s", "--", "true"});
  // (Assignment clears not_before: what it was is kept here.)
  std::string at = Col(id, "not_before");
  EXPECT_EQ("true", Col(id,
                        "not_before between created_at + interval '2.9 s' and "
                        "created_at + interval '3.5 s'"));
  auto ps = cluster_->Cli({"ps"});
  EXPECT_NE(std::string::npos, ps.out.find("starts at ")) << ps.out;
  ASSERT_TRUE(WaitFor([&] { return Final(id); }, 30s));
  EXPECT_EQ("succeeded", Col(id, "state"));
  EXPECT_EQ("true", Col(id, "started_at >= '" + at + "'::timestamptz"));
  EXPECT_EQ("true", Col(id, "assigned_at >= '" + at + "'::timestamptz"));

  // --at: a time PostgreSQL reads, kept as given.
  std::string when = db_.Scalar("select (now() + interval '2 s')::text");
  std::string at_id = Submit({"run", "--at", when, "--", "true"});
  EXPECT_EQ("true", Col(at_id, "not_before = '" + when + "'::timestamptz"));
  ASSERT_TRUE(WaitFor([&] { return Final(at_id); }, 30s));
  EXPECT_EQ("true", Col(at_id, "started_at >= '" + when + "'::timestamptz"));
}

TEST_F(DependenciesE2eTest, BadStartFlagsAreRefusedNamingTheRuleAndSubmitNothing) {
  long long before = db_.Count("select count(*) from pgfleet.jobs");
  struct Case {
    std::vector<std::string> flags;
    std::string words;
  };
  for (const Case& c : std::vector<Case>{
           {{"--in", "0"}, "--in must be a positive duration"},
           {{"--in", "-5s"}, "--in must be a positive duration"},
           {{"--in", "10x"}, "--in must be a positive duration"},
           {{"--in", "inf"}, "--in must be a positive duration"},
           {{"--in", "400d"}, "--in must be at most 365d"},
           {{"--at", "soon"}, "--at must be a time"},
           {{"--at", "2026-13-45 25:00"}, "--at must be a time"},
           {{"--at", "infinity"}, "--at must be a time"},
           {{"--at", "2099-01-01"}, "--at must be at most 365 days from now"},
           {{"--at", "2030-01-01", "--in", "5m"}, "--at and --in both say when"},
           {{"--after", "abc"}, "--after must be job ids"},
           {{"--after", "0"}, "--after must be job ids"},
           {{"--after", "1,,2"}, "--after must be job ids"},
           {{"--after", "-3"}, "--after must be job ids"},
           {{"--after", ""}, "--after must name at least one job id"},
       }) {
    std::vector<std::string> args = {"run"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    args.insert(args.end(), {"--", "true"});
    auto r = cluster_->Cli(args);
    EXPECT_EQ(2, r.exit_code) << c.flags[0] << " " << c.flags[1] << ": " << r.err;
    EXPECT_NE(std::string::npos, r.err.find(c.words)) << r.err;
  }
  // What only the database knows: a job that does not exist.
  auto r = cluster_->Cli({"run", "--after", "987654321", "--", "true"});
  EXPECT_EQ(1, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("after names job 987654321, which does not exist"))
      << r.err;
  EXPECT_EQ(before, db_.Count("select count(*) from pgfleet.jobs"));
}

}  // namespace
}  // namespace pgfleet::testing
