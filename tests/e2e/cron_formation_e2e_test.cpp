// Cron formations end to end (kind = 'cron', real daemons; docs/cron.md):
// with three schedulers, one killed mid-run, each due time of a fast
// schedule (a seconds field, the operator's test setting
// cron_seconds_field) makes exactly one job; overlap skip makes none while
// the previous run lasts; `formation status` shows the next and last runs;
// bad flags are refused naming the flag and the rule.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

long long Jobs(const TestDatabase& db, const std::string& formation) {
  return db.Count("select count(*) from pgfleet.jobs where formation = '" + formation + "'");
}

TEST(CronFormationTest, EachDueTimeMakesExactlyOneJobWith3SchedulersOneKilledMidRun) {
  TestDatabase db;
  db.Scalar("insert into pgfleet.settings (name, value) values ('cron_seconds_field', '1')");
  Cluster cluster(db);
  auto& s1 = cluster.StartScheduler("s1");
  cluster.StartScheduler("s2");
  cluster.StartScheduler("s3");
  cluster.StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  // Every 2 s ("a minute" sped up); catch_up 20 with overlap allow, so a due
  // time the killed scheduler was ticking is made by another, not lost.
  auto r = cluster.Cli({"formation", "create", "fast", "--kind", "cron", "--cron", "*/2 * * * * *",
                        "--time-zone", "UTC", "--overlap", "allow", "--catch-up", "20", "--cpu",
                        "100", "--", "true"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  ASSERT_TRUE(WaitFor([&] { return Jobs(db, "fast") >= 4; }, 30s)) << cluster.Logs();
  s1.Kill9();
  long long at_kill = Jobs(db, "fast");
  ASSERT_TRUE(WaitFor([&] { return Jobs(db, "fast") >= at_kill + 5; }, 40s)) << cluster.Logs();
  r = cluster.Cli({"formation", "delete", "fast"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  // One job per due time, every due time from the first to the last.
  EXPECT_EQ("0", db.Scalar("select count(*) - count(distinct due_at) from pgfleet.jobs "
                           "where formation = 'fast'"));
  EXPECT_EQ(db.Scalar("select count(*) from pgfleet.jobs where formation = 'fast'"),
            db.Scalar("select (extract(epoch from max(due_at) - min(due_at)) / 2 + 1)::bigint "
                      "from pgfleet.jobs where formation = 'fast'"))
      << "no due time was lost with s1 " << cluster.Logs();
  EXPECT_EQ("0", db.Scalar("select count(*) from pgfleet.jobs where formation = 'fast' and "
                           "extract(second from due_at)::integer % 2 <> 0"));
  EXPECT_EQ("0", db.Scalar("select count(*) from pgfleet.jobs where formation = 'fast' and "
                           "due_at > created_at + interval '1 second'"))
      << "no job made before its due time";
}

TEST(CronFormationTest, OverlapSkipMakesNoJobWhileThePreviousRunLasts) {
  TestDatabase db;
  db.Scalar("insert into pgfleet.settings (name, value) values ('cron_seconds_field', '1')");
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  // Due every second, each run lasting 3 s.
  auto r = cluster.Cli({"formation", "create", "slow", "--kind", "cron", "--cron", "* * * * * *",
                        "--time-zone", "Europe/Paris", "--cpu", "100", "--", "sleep", "3"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.jobs where formation = 'slow' and "
                   "state = 'succeeded'") >= 2;
      },
      40s))
      << cluster.Logs();
  r = cluster.Cli({"formation", "status", "slow"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  EXPECT_NE(std::string::npos, r.out.find("cron * * * * * * in Europe/Paris, overlap skip"))
      << r.out;
  EXPECT_NE(std::string::npos, r.out.find("next run ")) << r.out;
  EXPECT_NE(std::string::npos, r.out.find("last run ")) << r.out;
  r = cluster.Cli({"formation", "delete", "slow"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  EXPECT_GE(db.Count("select count(*) from pgfleet.job_events e join pgfleet.jobs j on j.id = "
                     "e.job_id where j.formation = 'slow' and e.kind = 'cron_skipped'"),
            2);
  // No two runs were ever live at once: each was made after the one before finished.
  EXPECT_EQ(
      "0",
      db.Scalar(
          "select count(*) from pgfleet.jobs a join pgfleet.jobs b on "
          "b.formation = a.formation and b.id > a.id where a.formation = 'slow' "
          "and a.state = 'succeeded' and b.created_at < a.finished_at - interval '0.5 second'"));
}

TEST(CronFormationTest, BadCronFlagsAreRefusedNamingTheFlagAndTheRule) {
  TestDatabase db;
  Cluster cluster(db);
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<std::string> ok = {"formation", "create", "c", "--kind", "cron"};
  auto with = [&](std::vector<std::string> more) {
    auto a = ok;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  for (const Case& c : std::vector<Case>{
           {with({"--time-zone", "UTC", "--", "true"}), "a cron formation needs --cron"},
           {with({"--cron", "@daily", "--", "true"}), "a cron formation needs --time-zone"},
           {with({"--cron", "@daily", "--time-zone", "UTC"}), "a cron formation needs a command"},
           {with({"--cron", "@daily", "--time-zone", "UTC", "--overlap", "x", "--", "true"}),
            "--overlap must be skip, allow or cancel_previous (got \"x\")"},
           {with({"--cron", "@daily", "--time-zone", "UTC", "--catch-up", "0", "--", "true"}),
            "--catch-up must be between 1 and 100 (got 0)"},
           {with({"--cron", "@daily", "--time-zone", "UTC", "--catch-up", "101", "--", "true"}),
            "--catch-up must be between 1 and 100 (got 101)"},
           {with({"--cron", "@daily", "--time-zone", "UTC", "--catch-up", "x", "--", "true"}),
            "catch-up"},
           {with({"--cron", "61 * * * *", "--time-zone", "UTC", "--", "true"}),
            "cron minute values must be 0 to 59 (got \"61\")"},
           {with({"--cron", "* * * * * *", "--time-zone", "UTC", "--", "true"}),
            "needs the operator setting cron_seconds_field = 1"},
           {with({"--cron", "@daily", "--time-zone", "Mars/Olympus", "--", "true"}),
            "time_zone must be an IANA time zone name"},
           {{"formation", "create", "b", "--cron", "@daily", "--", "true"},
            "--cron is for --kind cron only (got --kind batch)"},
           {{"formation", "create", "b", "--kind", "service", "--overlap", "skip", "--", "true"},
            "--overlap is for --kind cron only"},
           {{"formation", "create", "b", "--kind", "crontab", "--", "true"},
            "--kind must be service, batch, system, sysbatch or cron"},
       }) {
    SCOPED_TRACE(c.says);
    auto r = cluster.Cli(c.args);
    EXPECT_NE(0, r.exit_code);
    EXPECT_NE(std::string::npos, r.err.find(c.says)) << r.err;
  }
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.formations where name in ('c', 'b')"));
  auto r = cluster.Cli({"formation", "create", "nightly", "--kind", "cron", "--cron", "0 3 * * *",
                        "--time-zone", "Europe/Paris", "--", "./backup"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  EXPECT_EQ("03:00", db.Scalar("select to_char(next_due_at at time zone 'Europe/Paris', "
                               "'HH24:MI') from pgfleet.formations where name = 'nightly'"));
  r = cluster.Cli({"formation", "status", "nightly"});
  EXPECT_NE(std::string::npos, r.out.find("last run none yet")) << r.out;
}

}  // namespace
}  // namespace pgfleet::testing
