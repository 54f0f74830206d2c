// What the jobs and hosts tables refuse (DESIGN.md section 7), checked
// against the real server: each CHECK constraint rejects its bad value
// naming the rule, a job is inserted only as pending with pgfleet's columns
// unset, every state change follows the transition rule, and deleted jobs
// take their events with them. The insert trigger's other duties:
// schema_insert_trigger_test.cpp; migrate itself: migrate_test.cpp.

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "schema_probes.h"

namespace pgfleet::testing_schema {
namespace {

// --- CHECK constraints ------------------------------------------------------

TEST(JobsTable, EachCheckRejectsItsBadValueNamingTheField) {
  TestDatabase db;
  struct Case {
    std::string values;  // columns and values of the INSERT
    std::string rule;    // expected in the error
  };
  const std::vector<Case> cases = {
      {"(command, cpu) values (array['true'], 0)", "cpu must be > 0"},
      {"(command, cpu) values (array['true'], -5)", "cpu must be > 0"},
      {"(command, memory) values (array['true'], 0)", "memory must be > 0"},
      {"(command) values ('{}')", "command must be a non-empty array without nulls"},
      {"(command) values (array['true', null])", "command must be a non-empty array without nulls"},
      {"(command) values (array[null, 'x'])", "command must be a non-empty array without nulls"},
      {"(command, env) values (array['true'], '{\"a\":1}')", "env must be an object of strings"},
      {"(command, env) values (array['true'], '[1]')", "env must be an object of strings"},
      {"(command, constraints) values (array['true'], '\"x\"')",
       "constraints must be an object of strings"},
      {"(command, priority) values (array['true'], -1)", "priority must be between 0 and 100"},
      {"(command, priority) values (array['true'], 101)", "priority must be between 0 and 100"},
      {"(command, max_attempts) values (array['true'], 0)", "max_attempts must be >= 1"},
      {"(command, network) values (array['true'], 'overlay')",
       "network must be 'host', 'none' or 'bridge'"},
      {"(command, ports) values (array['true'], '{\"http\": 65536}')",
       "ports must be whole numbers from 0 to 65535"},
      {"(command, state) values (array['true'], 'bogus')", "state must be a job state"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.values);
    std::string err = ErrorOf(db, "insert into pgfleet.jobs " + c.values);
    EXPECT_NE(err.find(c.rule), std::string::npos) << "error was: " << err;
    EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs"), 0);
  }
  // The good value of the same shape is accepted, so the cases above fail for their field.
  EXPECT_EQ(ErrorOf(db,
                    "insert into pgfleet.jobs (command, cpu, memory, env, constraints, priority, "
                    "max_attempts, network) values (array['true'], 1, 1, '{\"a\":\"1\"}', "
                    "'{\"zone\":\"a\"}', 100, 1, 'none')"),
            "");
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs"), 1);
}

TEST(HostsTable, AllocationAboveTotalsIsRejectedNamingTheField) {
  TestDatabase db;
  std::string err = ErrorOf(db,
                            "insert into pgfleet.hosts (id, api_url, cpu, memory, cpu_allocated) "
                            "values ('h1', 'http://127.0.0.1:1', 1000, 1000, 1001)");
  EXPECT_NE(err.find("cpu_allocated must be between 0 and cpu"), std::string::npos) << err;
  EXPECT_EQ(db.Count("select count(*) from pgfleet.hosts"), 0);

  ASSERT_EQ(ErrorOf(db,
                    "insert into pgfleet.hosts (id, api_url, cpu, memory) "
                    "values ('h1', 'http://127.0.0.1:1', 1000, 1000)"),
            "");
  err = ErrorOf(db, "update pgfleet.hosts set cpu_allocated = cpu + 1 where id = 'h1'");
  EXPECT_NE(err.find("cpu_allocated must be between 0 and cpu"), std::string::npos) << err;
  err = ErrorOf(db, "update pgfleet.hosts set memory_allocated = memory + 1 where id = 'h1'");
  EXPECT_NE(err.find("memory_allocated must be between 0 and memory"), std::string::npos) << err;
  err = ErrorOf(db, "update pgfleet.hosts set cpu_allocated = -1 where id = 'h1'");
  EXPECT_NE(err.find("cpu_allocated must be between 0 and cpu"), std::string::npos) << err;
  EXPECT_EQ(db.Scalar("select cpu_allocated || '/' || memory_allocated from pgfleet.hosts"), "0/0");
}

// --- State machine ----------------------------------------------------------

TEST(JobsTable, InsertingARunningJobByHandIsRejected) {
  TestDatabase db;
  // With a host_id, so the only rule broken is "insert as pending".
  std::string err = ErrorOf(
      db,
      "insert into pgfleet.jobs (command, state, host_id) values (array['true'], 'running', 'h1')");
  EXPECT_NE(err.find("jobs must be inserted as pending"), std::string::npos) << err;
  // Without one, the host_id rule fires first; either way nothing is written.
  err = ErrorOf(db, "insert into pgfleet.jobs (command, state) values (array['true'], 'running')");
  EXPECT_NE(err.find("running"), std::string::npos) << err;
  EXPECT_NE(err, "");
  err = ErrorOf(db, "insert into pgfleet.jobs (command, attempt) values (array['true'], 3)");
  EXPECT_NE(err.find("jobs must be inserted as pending"), std::string::npos) << err;
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs"), 0);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.job_events"), 0);
}

TEST(JobsTable, ColumnsPgfleetOwnsCannotBeSetAtInsertAndTheErrorNamesThem) {
  TestDatabase db;
  // Each of these once let a hand-written row fake an outcome or wedge a host
  // (failures = 1100 overflowed the retry backoff in every report batch).
  for (const auto& [column, value] :
       std::vector<std::pair<std::string, std::string>>{{"desired_state", "'stop'"},
                                                        {"failures", "1100"},
                                                        {"host_losses", "2"},
                                                        {"pid", "1"},
                                                        {"exit_code", "0"},
                                                        {"signal", "9"},
                                                        {"oom_killed", "true"},
                                                        {"error", "'x'"},
                                                        {"output_tail", "'x'"},
                                                        {"peak_memory_bytes", "1"},
                                                        {"cpu_seconds", "1"},
                                                        {"assigned_at", "now()"},
                                                        {"started_at", "now()"},
                                                        {"finished_at", "now()"},
                                                        {"requeue_on_stop", "true"}}) {
    std::string err = ErrorOf(db, "insert into pgfleet.jobs (command, " + column +
                                      ") values (array['true'], " + value + ")");
    EXPECT_NE(err.find("jobs must be inserted as pending: " + column +
                       " is set by pgfleet, not at insert"),
              std::string::npos)
        << column << ": " << err;
  }
  // In a multi-row insert, one bad row refuses the statement.
  EXPECT_NE(ErrorOf(db,
                    "insert into pgfleet.jobs (command, failures) select array['true'], "
                    "case when g = 3 then 5 else 0 end from generate_series(1, 5) g"),
            "");
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs"), 0);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.job_events"), 0);
  // User columns, and not_before (run no earlier than), are fine.
  EXPECT_EQ(ErrorOf(db,
                    "insert into pgfleet.jobs (command, priority, not_before) values "
                    "(array['true'], 7, now() + interval '1 hour')"),
            "");
}

TEST(JobsTable, IllegalStateTransitionByUpdateIsRejected) {
  TestDatabase db;
  ASSERT_EQ(ErrorOf(db, "insert into pgfleet.jobs (command) values (array['true'])"), "");
  std::string err = ErrorOf(db, "update pgfleet.jobs set state = 'succeeded'");
  EXPECT_NE(err.find("illegal state transition"), std::string::npos) << err;
  EXPECT_NE(err.find("pending -> succeeded"), std::string::npos) << err;
  err = ErrorOf(db, "update pgfleet.jobs set state = 'running', host_id = 'h1'");
  EXPECT_NE(err.find("illegal state transition"), std::string::npos) << err;
  EXPECT_NE(err.find("pending -> running"), std::string::npos) << err;
  EXPECT_EQ(db.Scalar("select state from pgfleet.jobs"), "pending");
  // A legal one goes through.
  EXPECT_EQ(ErrorOf(db, "update pgfleet.jobs set state = 'cancelled'"), "");
  EXPECT_EQ(db.Scalar("select state from pgfleet.jobs"), "cancelled");
  err = ErrorOf(db, "update pgfleet.jobs set state = 'pending'");
  EXPECT_NE(err.find("cancelled -> pending"), std::string::npos) << err;
}

// The rule is the trigger's WHEN condition: every pair of states, checked.
TEST(JobsTable, EveryStatePairIsAllowedOrRefusedByTheTransitionRule) {
  TestDatabase db;
  const std::set<std::pair<std::string, std::string>> legal = {
      {"pending", "assigned"},   {"pending", "cancelled"}, {"assigned", "running"},
      {"assigned", "succeeded"}, {"assigned", "pending"},  {"assigned", "failed"},
      {"assigned", "cancelled"}, {"running", "succeeded"}, {"running", "failed"},
      {"running", "cancelled"},  {"running", "pending"}};
  const std::vector<std::string> states = {"pending",   "assigned", "running",
                                           "succeeded", "failed",   "cancelled"};
  for (const auto& from : states) {
    for (const auto& to : states) {
      if (from == to) continue;
      // Put the job in `from` without the rule, then try the change with it.
      db.Scalar(
          "truncate pgfleet.jobs cascade; set session_replication_role = replica; "
          "insert into pgfleet.jobs (command, state, host_id) values (array['true'], '" +
          from + "', 'h1'); set session_replication_role = origin; select 1");
      std::string err = ErrorOf(db, "update pgfleet.jobs set state = '" + to + "'");
      if (legal.count({from, to})) {
        EXPECT_EQ("", err) << from << " -> " << to;
      } else {
        EXPECT_NE(std::string::npos, err.find(from + " -> " + to)) << from << " -> " << to << err;
        EXPECT_EQ(from, db.Scalar("select state from pgfleet.jobs")) << "unchanged";
      }
    }
  }
}

// job_events has no foreign key (it cost a query per event row): deleting
// jobs, by retention or by hand, still takes their events and no others.
TEST(JobsTable, DeletedJobsTakeTheirEventsWithThem) {
  TestDatabase db;
  db.Scalar(
      "insert into pgfleet.jobs (command) select array['true'] from generate_series(1, 3); "
      "select 1");
  ASSERT_EQ(3, db.Count("select count(*) from pgfleet.job_events"));
  db.Scalar("delete from pgfleet.jobs where id in (select min(id) from pgfleet.jobs); select 1");
  EXPECT_EQ(2, db.Count("select count(*) from pgfleet.job_events"));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.job_events e where not exists "
                        "(select 1 from pgfleet.jobs j where j.id = e.job_id)"));
  db.Scalar(
      "set session_replication_role = replica; update pgfleet.jobs set state = 'succeeded', "
      "finished_at = now() - interval '30 days'; set session_replication_role = origin; "
      "select pgfleet.prune_finished(interval '7 days', 1000)");
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.jobs"));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.job_events"));
  // TRUNCATE, which fires no delete trigger, too.
  db.Scalar("insert into pgfleet.jobs (command) values (array['true']); select 1");
  ASSERT_EQ(1, db.Count("select count(*) from pgfleet.job_events"));
  db.Scalar("truncate pgfleet.jobs; select 1");
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.job_events"));
}

}  // namespace
}  // namespace pgfleet::testing_schema
