// Cron expressions in SQL (sql/024_cron.sql): pgfleet.cron_next and
// cron_times walking daylight-saving changes in two zones (Europe/Paris and
// America/New_York, spring forward and fall back, plus Australia/Sydney's
// southern-hemisphere ones), the field syntax, the dom/dow rule, and every
// malformed expression or zone refused naming the field and the rule.

#include <gtest/gtest.h>

#include <string>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

class CronExpressionTest : public ::testing::Test {
 protected:
  // The due times of `expr` in `zone` after `after` up to `until` (both
  // UTC), as "MM-DD HH:MI" in UTC, space-separated.
  std::string Times(const std::string& expr, const std::string& zone, const std::string& after,
                    const std::string& until) {
    return sql_.Str(
        "select coalesce(string_agg(to_char(t at time zone 'UTC', 'MM-DD HH24:MI'), ' '), '') "
        "from unnest(pgfleet.cron_times($1, $2, ($3 || 'Z')::timestamptz, ($4 || "
        "'Z')::timestamptz, "
        "1000)) t",
        expr, zone, after, until);
  }
  std::string Next(const std::string& expr, const std::string& zone, const std::string& after) {
    return sql_.Str(
        "select to_char(pgfleet.cron_next($1, $2, ($3 || 'Z')::timestamptz) at time zone 'UTC', "
        "'YYYY-MM-DD HH24:MI:SS')",
        expr, zone, after);
  }
  std::string Problem(const std::string& expr) {
    return sql_.Str("select pgfleet.cron_problem($1)", expr);
  }

  TestDatabase db_;
  Sql sql_{db_};
};

// Paris jumps from 02:00 CET (01:00 UTC) to 03:00 CEST on 29 March 2026.
TEST_F(CronExpressionTest, CronParisSpringForwardRunsASkippedWallTimeOnceAtTheJump) {
  // 02:30 does not exist on the 29th: it runs at 03:00 CEST (01:00 UTC).
  EXPECT_EQ("03-28 01:30 03-29 01:00 03-30 00:30",
            Times("30 2 * * *", "Europe/Paris", "2026-03-27 12:00", "2026-03-30 12:00"));
  // Every minute: 01:59 CET, then every skipped minute of 02:xx is the one
  // run at 03:00 CEST, then 03:01.
  EXPECT_EQ("03-29 00:59 03-29 01:00 03-29 01:01",
            Times("* * * * *", "Europe/Paris", "2026-03-29 00:58", "2026-03-29 01:01"));
  // 02:00 and 02:30 both skipped, 03:00 due as well: one run at the jump.
  EXPECT_EQ("03-29 01:00 03-29 01:30",
            Times("0,30 2,3 * * *", "Europe/Paris", "2026-03-29 00:00", "2026-03-29 01:45"));
  EXPECT_EQ("2026-03-29 01:00:00", Next("30 2 * * *", "Europe/Paris", "2026-03-28 02:00"));
}

// Paris falls back from 03:00 CEST (01:00 UTC) to 02:00 CET on 25 October 2026.
TEST_F(CronExpressionTest, CronParisFallBackRunsARepeatedWallTimeOnceAtItsFirstOccurrence) {
  // 02:30 happens at 00:30 UTC (CEST) and 01:30 UTC (CET): the first only.
  EXPECT_EQ("10-24 00:30 10-25 00:30 10-26 01:30",
            Times("30 2 * * *", "Europe/Paris", "2026-10-23 12:00", "2026-10-26 12:00"));
  // Hourly: 02:00 CEST, then 03:00 CET; the repeated 02:00 CET does not run.
  EXPECT_EQ("10-24 23:00 10-25 00:00 10-25 02:00 10-25 03:00",
            Times("0 * * * *", "Europe/Paris", "2026-10-24 22:30", "2026-10-25 03:30"));
  // Asked from inside the repeated hour (its second pass): the next wall
  // minute's first occurrence is past, so the next run is 03:00 CET.
  EXPECT_EQ("2026-10-25 02:00:00", Next("* * * * *", "Europe/Paris", "2026-10-25 01:10"));
}

// New York: 02:00 EST -> 03:00 EDT on 8 March, 02:00 EDT -> 01:00 EST on 1 November 2026.
TEST_F(CronExpressionTest, CronNewYorkSpringForwardAndFallBack) {
  EXPECT_EQ("03-07 07:30 03-08 07:00 03-09 06:30",
            Times("30 2 * * *", "America/New_York", "2026-03-07 00:00", "2026-03-09 12:00"));
  // 01:30 is 05:30 UTC (EDT) and 06:30 UTC (EST) on 1 November: the first.
  EXPECT_EQ("10-31 05:30 11-01 05:30 11-02 06:30",
            Times("30 1 * * *", "America/New_York", "2026-10-31 00:00", "2026-11-02 12:00"));
  // 03:00 daily is never ambiguous: one run a day, each at 03:00 local.
  EXPECT_EQ("03-07 08:00 03-08 07:00 11-01 08:00 11-02 08:00",
            Times("0 3 7,8 3 *", "America/New_York", "2026-03-01 00:00", "2026-03-31 00:00") + " " +
                Times("0 3 1,2 11 *", "America/New_York", "2026-10-31 00:00", "2026-11-30 00:00"));
}

// Sydney: 03:00 AEDT -> 02:00 AEST on 5 April, 02:00 AEST -> 03:00 AEDT on 4 October 2026.
TEST_F(CronExpressionTest, CronSydneyChangesTheOtherWayRound) {
  // 02:30 on 5 April: 15:30 UTC (AEDT) first, not 16:30 (AEST).
  EXPECT_EQ("04-04 15:30",
            Times("30 2 5 4 *", "Australia/Sydney", "2026-04-01 00:00", "2026-04-10 00:00"));
  // 02:30 on 4 October does not exist: at the jump, 03:00 AEDT (16:00 UTC).
  EXPECT_EQ("10-03 16:00",
            Times("30 2 4 10 *", "Australia/Sydney", "2026-10-01 00:00", "2026-10-10 00:00"));
}

TEST_F(CronExpressionTest, CronFieldsListsRangesStepsNamesAndTheDayRule) {
  EXPECT_EQ("01-01 00:00 01-01 00:15 01-01 00:30 01-01 00:45",
            Times("*/15 * * * *", "UTC", "2025-12-31 23:59", "2026-01-01 00:59"));
  EXPECT_EQ("01-01 00:05 01-01 00:07 01-01 00:09 01-01 00:20",
            Times("5-9/2,20 0 * * *", "UTC", "2025-12-31 23:59", "2026-01-01 00:59"));
  // 7 is Sunday as well as 0 (4 and 11 January 2026 are Sundays).
  EXPECT_EQ("01-04 00:00 01-11 00:00",
            Times("0 0 * * 7", "UTC", "2026-01-01 00:00", "2026-01-12 00:00"));
  EXPECT_EQ("01-04 00:00 01-11 00:00",
            Times("0 0 * * sun", "UTC", "2026-01-01 00:00", "2026-01-12 00:00"));
  // Both day fields restricted: either matches (the 13th, and Fridays).
  EXPECT_EQ("01-02 00:00 01-09 00:00 01-13 00:00",
            Times("0 0 13 * 5", "UTC", "2026-01-01 00:00", "2026-01-14 00:00"));
  // One restricted, one '*'-led (*/2: Sun, Tue, Thu, Sat): both must match,
  // so the 13th only on those days (13 January, a Tuesday; 13 June, a Saturday).
  EXPECT_EQ("01-13 00:00 06-13 00:00",
            Times("0 0 13 * */2", "UTC", "2026-01-01 00:00", "2026-07-01 00:00"));
  EXPECT_EQ("01-01 00:00 01-01 00:00", Times("@yearly", "UTC", "2025-12-31 00:00", "2027-12-30 00:00"));
  // A leap day: the next 29 February.
  EXPECT_EQ("2028-02-29 00:00:00", Next("0 0 29 2 *", "UTC", "2026-01-01 00:00"));
}

TEST_F(CronExpressionTest, CronBadExpressionsAreRefusedNamingTheFieldAndTheRule) {
  struct Case {
    const char* expr;
    const char* says;
  };
  for (const Case& c : {
           Case{"60 * * * *", "cron minute values must be 0 to 59 (got \"60\")"},
           Case{"-1 * * * *", "cron minute must be *, a value"},
           Case{"* 24 * * *", "cron hour values must be 0 to 23 (got \"24\")"},
           Case{"* * 0 * *", "cron day of month values must be 1 to 31 (got \"0\")"},
           Case{"* * 32 * *", "cron day of month values must be 1 to 31"},
           Case{"* * * 0 *", "cron month values must be 1 to 12"},
           Case{"* * * 13 *", "cron month values must be 1 to 12"},
           Case{"* * * * 8", "cron day of week values must be 0 to 7 (got \"8\")"},
           Case{"*/0 * * * *", "cron minute step must be >= 1"},
           Case{"30-10 * * * *", "cron minute range must not go down (got \"30-10\")"},
           Case{"99999 * * * *", "cron minute must be *, a value"},
           Case{"1,,2 * * * *", "cron minute must be *, a value"},
           Case{"garbage", "cron must have 5 fields"},
           Case{"", "cron must have 5 fields"},
           Case{"* * * *", "cron must have 5 fields"},
           Case{"* * * * * * *", "cron must have 5 fields"},
           Case{"@often", "cron must have 5 fields"},
           Case{"* * * * * *",
                "a 6th (seconds) field needs the operator setting cron_seconds_field = 1"},
           Case{"0 0 30 2 *", "cron day of month never comes in its months (got \"30 2\")"},
           Case{"0 0 31 4,6 *", "cron day of month never comes in its months"},
       }) {
    SCOPED_TRACE(c.expr);
    EXPECT_NE(std::string::npos, Problem(c.expr).find(c.says)) << Problem(c.expr);
  }
  EXPECT_NE(std::string::npos, Problem(std::string(201, '*')).find("at most 200 characters"));
  for (const char* good : {"0 3 * * *", "*/5 1-3,22 * jan-mar mon-fri", "@daily", "0 0 31 * *"}) {
    EXPECT_EQ("", Problem(good)) << good;
  }
}

TEST_F(CronExpressionTest, CronZonesMustBeIanaNames) {
  for (const char* bad : {"Mars/Olympus", "+05", "utc", "Europe/paris", "", "UTC; drop table x"}) {
    EXPECT_NE(std::string::npos, sql_.Str("select pgfleet.cron_zone_problem($1)", std::string(bad))
                                     .find("time_zone must be an IANA time zone name"))
        << bad;
  }
  for (const char* good : {"Europe/Paris", "UTC", "America/New_York", "Asia/Kolkata"}) {
    EXPECT_EQ("", sql_.Str("select pgfleet.cron_zone_problem($1)", std::string(good))) << good;
  }
}

// A seconds field, for tests only, and the catch-up window that never
// walks more than it must.
TEST_F(CronExpressionTest, CronSecondsFieldAndRecentTimes) {
  EXPECT_EQ("2026-01-01 00:00:20", Next("*/20 * * * * *", "UTC", "2026-01-01 00:00:00"));
  EXPECT_EQ("3 true",
            sql_.Str("select cardinality(r.due) || ' ' || r.missed from "
                     "pgfleet.cron_recent_times('* * * * *', 'UTC', now() - interval '30 days', "
                     "now(), 3) r"));
  EXPECT_EQ("7 true",
            sql_.Str("select cardinality(r.due) || ' ' || r.missed from "
                     "pgfleet.cron_recent_times('0 3 * * *', 'UTC', now() - interval '30 days', "
                     "now(), 100) r"))
      << "at most 7 days back";
  EXPECT_EQ("2 false", sql_.Str("select cardinality(r.due) || ' ' || r.missed from "
                            "pgfleet.cron_recent_times('0 * * * *', 'UTC', "
                            "date_trunc('hour', now()) - interval '1 hour', now(), 5) r"));
}

}  // namespace
}  // namespace pgfleet::integration
