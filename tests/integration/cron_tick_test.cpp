// Cron formations in SQL (migration 0034, sql/025_cron_tick.sql): a
// scheduler's pgfleet.cron_tick makes one job per due time from the
// template (never two, however often the same due time is ticked), follows
// overlap (skip, allow, cancel_previous) and catch_up, and moves next_due_at
// past now; every bad column value, and every caller who may not, is
// refused naming the rule and changes nothing.

#include <gtest/gtest.h>

#include <string>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

class CronTickTest : public ::testing::Test {
 protected:
  void SetUp() override {
    alice_login_ = db_.CreateLogin("alice", {"pgfleet_submitter"});
    olga_login_ = db_.CreateLogin("olga", {"pgfleet_operator"});
    sched_login_ = db_.CreateLogin("sched", {"pgfleet_scheduler"});
    alice_ = std::make_unique<Sql>(db_.DsnAs(alice_login_));
    olga_ = std::make_unique<Sql>(db_.DsnAs(olga_login_));
    sched_ = std::make_unique<Sql>(db_.DsnAs(sched_login_));
  }
  // A per-minute cron formation made by olga; its id.
  long long Create(const std::string& overlap, int catch_up) {
    return olga_->Num(
        "insert into pgfleet.formations (name, kind, command, cron, time_zone, overlap, catch_up) "
        "values ('tick', 'cron', '{true}', '* * * * *', 'Europe/Paris', $1, $2) returning id",
        overlap, catch_up);
  }
  // As if schedulers had last looked `ago` before now: the due time then
  // (whole minutes) is the next one.
  void DueSince(const std::string& ago) {
    owner_.Exec(
        "update pgfleet.formations set next_due_at = date_trunc('minute', now() - $1::interval) "
        "where name = 'tick'",
        ago);
  }
  long long Tick(long long id) { return sched_->Num("select pgfleet.cron_tick($1::integer)", id); }
  // Ticks a first run, then makes it as if an hour old and still live, the
  // next due time come: its id.
  long long LiveRunAndNextDue(long long id) {
    DueSince("0 seconds");
    EXPECT_EQ(1, Tick(id));
    long long first = owner_.Num("select id from pgfleet.jobs where formation = 'tick'");
    owner_.Exec("update pgfleet.jobs set due_at = due_at - interval '1 hour' where id = $1", first);
    DueSince("0 seconds");
    return first;
  }
  long long Jobs(const std::string& where = "true") {
    return owner_.Num("select count(*) from pgfleet.jobs where formation = 'tick' and " + where);
  }
  std::string Everything() {
    return owner_.Str(
        "select md5(coalesce((select string_agg(f::text, '|' order by id) from pgfleet.formations "
        "f), '') || coalesce((select string_agg(j::text, '|' order by id) from pgfleet.jobs j), "
        "''))");
  }

  TestDatabase db_;
  Sql owner_{db_};
  std::string alice_login_, olga_login_, sched_login_;
  std::unique_ptr<Sql> alice_, olga_, sched_;
};

TEST_F(CronTickTest, CronTickMakesOneJobPerDueTimeEvenTickedAgain) {
  long long id = Create("allow", 1);
  EXPECT_EQ(1, owner_.Num("select count(*) from pgfleet.formations where name = 'tick' and "
                          "next_due_at > now() and next_due_at <= now() + interval '1 minute'"))
      << "next_due_at is set when the formation is made";
  EXPECT_EQ(0, Tick(id)) << "not due yet";
  DueSince("0 seconds");
  EXPECT_EQ(1, Tick(id));
  EXPECT_EQ(1, Jobs("due_at = date_trunc('minute', now()) and owner = '" + olga_login_ +
                    "' and command = '{true}' and state = 'pending'"));
  EXPECT_EQ(1, owner_.Num("select count(*) from pgfleet.formations where name = 'tick' and "
                          "next_due_at > now() and last_due_at = date_trunc('minute', now())"));
  EXPECT_EQ(0, Tick(id)) << "ticked: not due again until the next minute";
  // A scheduler that restarted from an older view of the formation ticks
  // the same due time again: the unique key makes no second job.
  DueSince("0 seconds");
  EXPECT_EQ(0, Tick(id));
  EXPECT_EQ(1, Jobs());
  EXPECT_NE("",
            owner_.Str("select 1 from pg_indexes where indexname = 'jobs_formation_due_at_key'"));
}

TEST_F(CronTickTest, CronCatchUpMakesAtMostCatchUpJobsForTheLatestMissedTicks) {
  long long id = Create("allow", 3);
  DueSince("3 hours");
  EXPECT_EQ(3, Tick(id));
  // The three latest minutes, the last being now's.
  EXPECT_EQ(3, Jobs("due_at > date_trunc('minute', now()) - interval '3 minutes'"));
  EXPECT_EQ(1,
            owner_.Num("select count(*) from pgfleet.job_events e join pgfleet.jobs j on "
                       "j.id = e.job_id where j.formation = 'tick' and e.kind = 'cron_missed' "
                       "and e.detail like '%were missed while no scheduler ticked; catch_up 3%'"));
  EXPECT_EQ(
      1,
      owner_.Num(
          "select count(*) from pgfleet.formations where name = 'tick' and next_due_at > now()"));
  EXPECT_EQ(0, Tick(id));

  // Overlap skip (the default): of several missed due times only the
  // latest runs, even with catch_up above 1, and a week back at most.
  owner_.Exec("update pgfleet.formations set overlap = 'skip' where name = 'tick'");
  owner_.Exec(
      "select pgfleet.stop_jobs(array(select id from pgfleet.jobs where formation = 'tick'), "
      "'done')");
  // (Those runs as if an hour old: this minute's due time is free again.)
  owner_.Exec("update pgfleet.jobs set due_at = due_at - interval '1 hour' where formation = 'tick'");
  DueSince("30 days");
  EXPECT_EQ(1, Tick(id));
  EXPECT_EQ(4, Jobs());
}

TEST_F(CronTickTest, CronOverlapSkipMakesNoJobWhileTheLastRunIsLiveAndSaysSo) {
  long long id = Create("skip", 1);
  long long first = LiveRunAndNextDue(id);
  EXPECT_EQ(0, Tick(id));
  EXPECT_EQ(1, Jobs());
  EXPECT_EQ(1, owner_.Num("select count(*) from pgfleet.job_events where job_id = $1 and kind = "
                          "'cron_skipped' and detail like '%was skipped: this run%(overlap skip)'",
                          first));
  EXPECT_EQ(1, owner_.Num("select count(*) from pgfleet.formations where name = 'tick' and "
                          "last_due_at = date_trunc('minute', now()) and next_due_at > now()"))
      << "a skipped due time is handled: not ticked again";
  // Its run over, the next due time runs.
  owner_.Exec("select pgfleet.stop_jobs(array[$1::bigint], 'done')", first);
  DueSince("0 seconds");
  EXPECT_EQ(1, Tick(id));
  EXPECT_EQ(2, Jobs());
}

TEST_F(CronTickTest, CronOverlapCancelPreviousStopsTheLiveRunAndStartsTheNew) {
  long long id = Create("cancel_previous", 1);
  long long first = LiveRunAndNextDue(id);
  EXPECT_EQ(1, Tick(id));
  EXPECT_EQ("cancelled", owner_.Str("select state from pgfleet.jobs where id = $1", first));
  EXPECT_NE(std::string::npos, owner_.Str("select error from pgfleet.jobs where id = $1", first)
                                   .find("replaced by the run due at"));
  EXPECT_EQ(1, Jobs("state = 'pending'"));
}

TEST_F(CronTickTest, CronOverlapLooksOnlyAtTheFormationsOwnRuns) {
  long long id = Create("skip", 1);
  // alice puts a job of her own in olga's formation: it neither blocks nor is stopped.
  alice_->Exec("insert into pgfleet.jobs (formation, command) values ('tick', '{sleep,60}')");
  DueSince("0 seconds");
  EXPECT_EQ(1, Tick(id));
  EXPECT_EQ(2, Jobs("state = 'pending'"));
}

TEST_F(CronTickTest, CronBadColumnValuesAreRefusedNamingTheRuleAndChangeNothing) {
  const std::string insert =
      "insert into pgfleet.formations (name, kind, command, cron, time_zone, overlap, catch_up) "
      "values ('bad', $1, '{true}', $2, $3, $4, $5::integer)";
  struct Case {
    const char *kind, *cron, *zone, *overlap;
    int catch_up;
    const char* says;
  };
  std::string before = Everything();
  for (const Case& c : {
           Case{"cron", "61 * * * *", "UTC", "skip", 1, "cron minute values must be 0 to 59"},
           Case{"cron", "* * * * mon-xyz", "UTC", "skip", 1, "cron day of week must be *"},
           Case{"cron", "* * * * * *", "UTC", "skip", 1,
                "needs the operator setting cron_seconds_field = 1"},
           Case{"cron", "0 3 * * *", "Europe/Pariss", "skip", 1,
                "time_zone must be an IANA time zone name"},
           Case{"cron", "0 3 * * *", "EST+5", "skip", 1,
                "time_zone must be an IANA time zone name"},
           Case{"cron", "0 3 * * *", "UTC", "x", 1,
                "overlap must be skip, allow or cancel_previous"},
           Case{"cron", "0 3 * * *", "UTC", "skip", 0, "catch_up must be between 1 and 100"},
           Case{"cron", "0 3 * * *", "UTC", "skip", 101, "catch_up must be between 1 and 100"},
           Case{"cron", "0 3 * * *", "UTC", "skip", -1, "catch_up must be between 1 and 100"},
           Case{"batch", "0 3 * * *", "UTC", "skip", 1,
                "only a cron formation has cron, time_zone or due times"},
           Case{"cronx", "0 3 * * *", "UTC", "skip", 1,
                "kind must be service, batch, system, sysbatch or cron"},
       }) {
    SCOPED_TRACE(c.says);
    std::string err = olga_->ErrorOf(insert, std::string(c.kind), std::string(c.cron),
                                     std::string(c.zone), std::string(c.overlap), c.catch_up);
    EXPECT_NE(std::string::npos, err.find(c.says)) << err;
  }
  std::string err = olga_->ErrorOf(
      "insert into pgfleet.formations (name, kind, command, time_zone) values ('bad', 'cron', "
      "'{true}', 'UTC')");
  EXPECT_NE(std::string::npos, err.find("cron must be given for a cron formation")) << err;
  err = olga_->ErrorOf(
      "insert into pgfleet.formations (name, kind, cron, time_zone) values "
      "('bad', 'cron', '@daily', 'UTC')");
  EXPECT_NE(std::string::npos,
            err.find("a service, system, sysbatch or cron formation needs a command"))
      << err;
  EXPECT_EQ(before, Everything());

  Create("skip", 1);
  before = Everything();
  err = olga_->ErrorOf("update pgfleet.formations set cron = '0 25 * * *' where name = 'tick'");
  EXPECT_NE(std::string::npos, err.find("cron hour values must be 0 to 23")) << err;
  err = olga_->ErrorOf("update pgfleet.formations set time_zone = 'Nowhere' where name = 'tick'");
  EXPECT_NE(std::string::npos, err.find("time_zone must be an IANA time zone name")) << err;
  EXPECT_EQ(before, Everything());
  // A good change moves the next due time to the new schedule's.
  olga_->Exec("update pgfleet.formations set cron = '0 3 * * *' where name = 'tick'");
  EXPECT_EQ("03:00",
            owner_.Str("select to_char(next_due_at at time zone 'Europe/Paris', 'HH24:MI') "
                       "from pgfleet.formations where name = 'tick'"));
}

TEST_F(CronTickTest, CronWhoMayDoWhatIsEnforced) {
  std::string before = Everything();
  // Only operators make formations, each its own.
  std::string err = alice_->ErrorOf(
      "insert into pgfleet.formations (name, kind, command, cron, time_zone) values ('a', 'cron', "
      "'{true}', '@daily', 'UTC')");
  EXPECT_NE(std::string::npos, err.find("permission denied")) << err;
  err = olga_->ErrorOf(
      "insert into pgfleet.formations (name, kind, command, cron, time_zone, owner) values ('a', "
      "'cron', '{true}', '@daily', 'UTC', $1)",
      alice_login_);
  EXPECT_NE(std::string::npos, err.find("owner must be the creating role")) << err;
  // A due time is the schedulers' to write: a job that claimed one would take its run.
  err = alice_->ErrorOf("insert into pgfleet.jobs (command, due_at) values ('{true}', now())");
  EXPECT_NE(std::string::npos, err.find("due_at is set by pgfleet, not at insert")) << err;
  err = alice_->ErrorOf(
      "insert into pgfleet.jobs (command, due_at) select '{true}', now() + g * interval '1 minute' "
      "from generate_series(1, 3) g");
  EXPECT_NE(std::string::npos, err.find("due_at is set by pgfleet, not at insert")) << err;
  // The seconds field is an operator's setting; submitters neither set it nor tick.
  err = alice_->ErrorOf(
      "insert into pgfleet.settings (name, value) values ('cron_seconds_field', '1')");
  EXPECT_NE(std::string::npos, err.find("permission denied")) << err;
  err = olga_->ErrorOf(
      "insert into pgfleet.settings (name, value) values ('cron_seconds_field', '2')");
  EXPECT_NE(std::string::npos, err.find("cron_seconds_field must be between 0 and 1")) << err;
  err = alice_->ErrorOf("select pgfleet.cron_tick(1)");
  EXPECT_NE(std::string::npos, err.find("permission denied")) << err;
  EXPECT_EQ(before, Everything());

  olga_->Exec("insert into pgfleet.settings (name, value) values ('cron_seconds_field', '1')");
  olga_->Exec(
      "insert into pgfleet.formations (name, kind, command, cron, time_zone) values ('fast', "
      "'cron', '{true}', '*/5 * * * * *', 'UTC')");
  EXPECT_EQ(1, owner_.Num("select count(*) from pgfleet.formations where name = 'fast' and "
                          "next_due_at <= now() + interval '5 seconds'"));
}

TEST_F(CronTickTest, CronStatusAndWakeUpShowTheNextDueTime) {
  long long id = Create("skip", 1);
  double in = std::stod(sched_->Str("select pgfleet.next_retry_in()"));
  EXPECT_GT(in, 0);
  EXPECT_LE(in, 60) << "a sleeping scheduler wakes for the next minute";
  DueSince("0 seconds");
  Tick(id);
  EXPECT_EQ(
      "skip * * * * * Europe/Paris pending",
      alice_->Str("select overlap || ' ' || cron || ' ' || time_zone || ' ' || "
                  "(last_run->>'state') from pgfleet.formation_status where name = 'tick' "
                  "and next_due_at > now() and (last_run->>'due_at')::timestamptz = last_due_at"));
  // A deleted formation is not ticked.
  olga_->Exec("select pgfleet.delete_formation('tick')");
  DueSince("0 seconds");
  EXPECT_EQ(0, Tick(id));
}

}  // namespace
}  // namespace pgfleet::integration
