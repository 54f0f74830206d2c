// The SQL contract of migrations/ and sql/ (DESIGN.md section 7), checked against
// the real server: CHECK constraints and triggers reject bad rows naming the rule,
// the jobs trigger notifies once per formation per statement, and every object
// is documented. Migrate itself: migrate_test.cpp.

#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/model/constants.h"
#include "tests/support/test_support.h"

namespace pgfleet {
namespace {

using testing::TestDatabase;

// Runs sql in its own transaction; returns the server's error message, or ""
// when the statement succeeded (and was committed).
std::string ErrorOf(const TestDatabase& db, const std::string& sql) {
  auto conn = db.Connect();
  try {
    pqxx::work tx(*conn);
    tx.exec(sql);
    tx.commit();
  } catch (const pqxx::sql_error& e) {
    return e.what();
  }
  return "";
}

// Collects every payload delivered on a channel.
class Collector : public pqxx::notification_receiver {
 public:
  Collector(pqxx::connection& conn, const std::string& channel)
      : pqxx::notification_receiver(conn, channel) {}
  void operator()(const std::string& payload, int /*backend_pid*/) override {
    payloads.push_back(payload);
  }
  std::vector<std::string> payloads;
};

// Waits the whole window, so that a surplus notification would be seen too.
void CollectFor(pqxx::connection& conn, std::chrono::milliseconds window) {
  auto deadline = std::chrono::steady_clock::now() + window;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    conn.await_notification(left.count() / 1000000, left.count() % 1000000);
  }
  conn.get_notifs();
}

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
      {"(command, network) values (array['true'], 'bridge')", "network must be 'host' or 'none'"},
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

// --- Notifications ----------------------------------------------------------

// What a scheduler does before it sleeps: take the idle lock exclusively.
bool TryIdleLock(pqxx::connection& conn) {
  pqxx::nontransaction tx(conn);
  return tx.exec1("select pg_try_advisory_lock(pgfleet.lock_class(), pgfleet.idle_lock_key())")[0]
      .as<bool>();
}

TEST(JobsTrigger, NotifiesOncePerFormationPerStatementWhenASchedulerSleeps) {
  TestDatabase db;
  auto listener = db.Connect();
  Collector collector(*listener, model::kWorkChannel);
  ASSERT_TRUE(TryIdleLock(*listener));

  auto writer = db.Connect();
  {
    pqxx::work tx(*writer);
    tx.exec0(
        "insert into pgfleet.jobs (command, formation) "
        "select array['true'], 'f' || (g % 3) from generate_series(1, 10000) g");
    tx.commit();
  }
  CollectFor(*listener, std::chrono::seconds(1));

  std::map<std::string, std::string> ids;  // name -> id
  {
    pqxx::work tx(*writer);
    for (const auto& row :
         tx.exec("select name, id::text from pgfleet.formations where name in ('f0', 'f1', 'f2')"))
      ids[row[0].as<std::string>()] = row[1].as<std::string>();
  }
  ASSERT_EQ(ids.size(), 3u);
  std::multiset<std::string> got(collector.payloads.begin(), collector.payloads.end());
  std::multiset<std::string> want = {ids["f0"], ids["f1"], ids["f2"]};
  EXPECT_EQ(got, want);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs"), 10000);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.job_events where kind = 'created'"), 10000);

  collector.payloads.clear();
  {
    pqxx::work tx(*writer);
    tx.exec0("insert into pgfleet.jobs (command, formation) values (array['true'], 'f1')");
    tx.commit();
  }
  CollectFor(*listener, std::chrono::seconds(1));
  EXPECT_EQ(collector.payloads, std::vector<std::string>{ids["f1"]});
}

TEST(JobsTrigger, WithNoSchedulerAsleepAnInsertNotifiesNothingAndHoldsOffSleepUntilItCommits) {
  TestDatabase db;
  auto listener = db.Connect();
  Collector collector(*listener, model::kWorkChannel);
  auto writer = db.Connect();
  auto scheduler = db.Connect();
  {
    pqxx::work tx(*writer);
    tx.exec0("insert into pgfleet.jobs (command) values (array['true'])");
    // A scheduler cannot go to sleep while this insert is in flight: it would
    // miss it (no NOTIFY was sent).
    EXPECT_FALSE(TryIdleLock(*scheduler));
    tx.commit();
  }
  CollectFor(*listener, std::chrono::milliseconds(500));
  EXPECT_TRUE(collector.payloads.empty());
  // Committed: now it can, and a look at the table finds the job.
  EXPECT_TRUE(TryIdleLock(*scheduler));
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs where state = 'pending'"), 1);
  // While it sleeps, the next insert notifies.
  db.Scalar("insert into pgfleet.jobs (command) values (array['true'])");
  CollectFor(*listener, std::chrono::milliseconds(500));
  EXPECT_EQ(collector.payloads.size(), 1u);
}

TEST(JobsTrigger, RolledBackInsertNotifiesNothing) {
  TestDatabase db;
  auto listener = db.Connect();
  Collector collector(*listener, model::kWorkChannel);
  ASSERT_TRUE(TryIdleLock(*listener));
  auto writer = db.Connect();
  {
    pqxx::work tx(*writer);
    tx.exec0("insert into pgfleet.jobs (command) values (array['true'])");
    tx.abort();
  }
  CollectFor(*listener, std::chrono::milliseconds(500));
  EXPECT_TRUE(collector.payloads.empty());
}

// --- Formations -------------------------------------------------------------

TEST(JobsTrigger, UnknownFormationIsCreatedAsBatch) {
  TestDatabase db;
  ASSERT_EQ(
      ErrorOf(db,
              "insert into pgfleet.jobs (command, formation) values (array['true'], 'nightly')"),
      "");
  EXPECT_EQ(db.Scalar("select kind from pgfleet.formations where name = 'nightly'"), "batch");
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs where formation = 'nightly'"), 1);
  // A second job into it reuses the formation.
  ASSERT_EQ(
      ErrorOf(db,
              "insert into pgfleet.jobs (command, formation) values (array['true'], 'nightly')"),
      "");
  EXPECT_EQ(db.Count("select count(*) from pgfleet.formations where name = 'nightly'"), 1);
}

TEST(JobsTrigger, BadFormationNameIsRejectedAndCreatesNoJob) {
  TestDatabase db;
  long long formations = db.Count("select count(*) from pgfleet.formations");
  std::string err = ErrorOf(
      db, "insert into pgfleet.jobs (command, formation) values (array['true'], 'bad name!')");
  EXPECT_NE(err.find("formation name must be 1-100 of A-Z a-z 0-9 . _ -"), std::string::npos)
      << err;
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs"), 0);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.formations"), formations);
}

// A heartbeat records the host's condition: set, kept (the common case, a
// one-row update), changed, cleared; clearing it gives capacity back, so a
// sleeping scheduler is woken.
TEST(Heartbeat, AConditionIsSetKeptChangedAndClearedAndTheClearWakesSleepingSchedulers) {
  TestDatabase db;
  const std::string gen = db.Scalar(
      "select pgfleet.register_host('h1', 'http://127.0.0.1:1', 1000, 1000, '{}', 'sim', null)");
  auto beat = [&](const std::string& condition) {
    db.Scalar("select state from pgfleet.heartbeat('h1', " + gen + ", 0, " + condition + ")");
    return db.Scalar(
        "select coalesce(condition, '(none)') || ' ' || running_jobs "
        "from pgfleet.host_heartbeats where host_id = 'h1'");
  };
  auto listener = db.Connect();
  Collector collector(*listener, model::kWorkChannel);
  ASSERT_TRUE(TryIdleLock(*listener));

  EXPECT_EQ(beat("null"), "(none) 0");
  EXPECT_EQ(beat("'disk pressure: 97% full'"), "disk pressure: 97% full 0");
  const std::string seen = db.Scalar("select last_seen from pgfleet.host_heartbeats");
  EXPECT_EQ(beat("'disk pressure: 97% full'"), "disk pressure: 97% full 0");
  EXPECT_NE(db.Scalar("select last_seen from pgfleet.host_heartbeats"), seen);
  EXPECT_EQ(beat("'disk pressure: 98% full'"), "disk pressure: 98% full 0");
  CollectFor(*listener, std::chrono::milliseconds(300));
  EXPECT_TRUE(collector.payloads.empty());  // no capacity came back yet
  EXPECT_EQ(beat("''"), "(none) 0");
  CollectFor(*listener, std::chrono::milliseconds(500));
  EXPECT_EQ(collector.payloads, std::vector<std::string>{"*"});
  collector.payloads.clear();
  EXPECT_EQ(beat("null"), "(none) 0");
  CollectFor(*listener, std::chrono::milliseconds(300));
  EXPECT_TRUE(collector.payloads.empty());
  // An older generation's heartbeat changes nothing.
  db.Scalar("select state from pgfleet.heartbeat('h1', " + gen + " - 1, 5, 'disk pressure')");
  EXPECT_EQ(db.Scalar("select coalesce(condition, '(none)') || ' ' || running_jobs "
                      "from pgfleet.host_heartbeats where host_id = 'h1'"),
            "(none) 0");
}

// What a heartbeat answers of the host's live attempts: the digest hostd
// compares with its own (XOR of the first 64 bits of md5("id/attempt/uid"))
// and how many are asked to stop; "0" and 0 for a host that runs nothing.
TEST(Heartbeat, AnswersTheDigestOfTheHostsLiveAttemptsAndHowManyToStop) {
  TestDatabase db;
  const std::string gen = db.Scalar(
      "select pgfleet.register_host('h1', 'http://127.0.0.1:1', 1000, 1000, '{}', 'sim', null)");
  auto beat = [&] {
    return db.Scalar("select live_digest || ' ' || stops from pgfleet.heartbeat('h1', " + gen +
                     ", 0)");
  };
  const std::string digest_of_live =
      "select coalesce(bit_xor(('x' || left(md5(id || '/' || attempt || '/' || uid::text), "
      "16))::bit(64)::bigint), 0)::text from pgfleet.jobs where state in ('assigned', 'running')";
  EXPECT_EQ(beat(), "0 0");
  db.Scalar(
      "insert into pgfleet.jobs (command, cpu, memory) select array['true'], 100, 64 "
      "from generate_series(1, 3)");
  ASSERT_EQ(db.Count("select count(*) from pgfleet.assign_jobs((select jsonb_agg("
                     "jsonb_build_object('job', id, 'host', 'h1')) from pgfleet.jobs))"),
            3);
  const std::string three = db.Scalar(digest_of_live);
  EXPECT_NE(three, "0");
  EXPECT_EQ(beat(), three + " 0");
  // One asked to stop.
  db.Scalar("select pgfleet.cancel((select min(id) from pgfleet.jobs))");
  EXPECT_EQ(beat(), three + " 1");
  // One ended: the digest is the other two's.
  db.Scalar("select count(*) from pgfleet.report_jobs('h1', " + gen +
            ", (select jsonb_build_array(jsonb_build_object('job', max(id), 'attempt', 1, "
            "'kind', 'exited', 'exit_code', 0)) from pgfleet.jobs))");
  const std::string two = db.Scalar(digest_of_live);
  EXPECT_NE(two, three);
  EXPECT_EQ(beat(), two + " 1");
  // All ended: nothing live, nothing allocated.
  db.Scalar("select count(*) from pgfleet.report_jobs('h1', " + gen +
            ", (select jsonb_agg(jsonb_build_object('job', id, 'attempt', 1, 'kind', 'exited', "
            "'exit_code', 0)) from pgfleet.jobs where state = 'assigned'))");
  EXPECT_EQ(db.Scalar("select cpu_allocated || ' ' || memory_allocated from pgfleet.hosts"), "0 0");
  EXPECT_EQ(beat(), "0 0");
  // An unknown host's heartbeat answers no row.
  EXPECT_EQ(db.Scalar("select count(*) from pgfleet.heartbeat('nobody', 1, 0)"), "0");
}

// A report that frees resources wakes a sleeping scheduler by default. With
// p_wake false (as hostd calls it) it sends no NOTIFY, so its commit holds no
// lock on the notification queue, and says in wake_schedulers whether the
// caller must wake them after the commit: only if it freed resources while a
// scheduler sleeps. While none sleeps, none can fall asleep (and miss the
// room) until the report has committed.
TEST(ReportJobsWake, FreedResourcesNotifyUnlessTheCallerWakesSchedulersItself) {
  TestDatabase db;
  const std::string gen = db.Scalar(
      "select pgfleet.register_host('h1', 'http://127.0.0.1:1', 1000, 1000, '{}', 'sim', null)");
  db.Scalar(
      "insert into pgfleet.jobs (command, cpu, memory) select array['true'], 100, 64 "
      "from generate_series(1, 4)");
  ASSERT_EQ(db.Count("select count(*) from pgfleet.assign_jobs((select jsonb_agg("
                     "jsonb_build_object('job', id, 'host', 'h1')) from pgfleet.jobs))"),
            4);
  auto listener = db.Connect();
  Collector collector(*listener, model::kWorkChannel);
  // One report of the n-th job (by id) on `conn`: its accepted and
  // wake_schedulers columns.
  auto report = [&](pqxx::transaction_base& tx, int n, const std::string& kind,
                    const std::string& wake) {
    auto r = tx.exec1(
        "select accepted || ' ' || wake_schedulers from pgfleet.report_jobs('h1', " + gen +
        ", (select jsonb_build_array(jsonb_build_object('job', id, 'attempt', 1, 'kind', '" + kind +
        "', 'exit_code', 0)) from pgfleet.jobs order by id offset " + std::to_string(n - 1) +
        " limit 1)" + wake + ")");
    return r[0].as<std::string>();
  };
  auto reporter = db.Connect();
  auto other_scheduler = db.Connect();
  // No scheduler asleep: freed, no wake asked for, and no scheduler may
  // fall asleep before this commits.
  {
    pqxx::work tx(*reporter);
    EXPECT_EQ(report(tx, 1, "exited", ", false"), "true false");
    EXPECT_FALSE(TryIdleLock(*other_scheduler));
    tx.commit();
  }
  EXPECT_EQ(db.Scalar("select cpu_allocated from pgfleet.hosts"), "300");
  // Asleep: a report that frees nothing asks for no wake; one that frees
  // asks for it, and neither notifies.
  ASSERT_TRUE(TryIdleLock(*listener));
  {
    pqxx::work tx(*reporter);
    EXPECT_EQ(report(tx, 2, "running", ", false"), "true false");
    EXPECT_EQ(report(tx, 3, "exited", ", false"), "true true");
    tx.commit();
  }
  CollectFor(*listener, std::chrono::milliseconds(500));
  EXPECT_TRUE(collector.payloads.empty());
  EXPECT_EQ(db.Scalar("select cpu_allocated from pgfleet.hosts"), "200");  // freed all the same
  // By default the report wakes them itself.
  {
    pqxx::work tx(*reporter);
    EXPECT_EQ(report(tx, 4, "exited", ""), "true false");
    tx.commit();
  }
  CollectFor(*listener, std::chrono::milliseconds(500));
  EXPECT_EQ(collector.payloads, std::vector<std::string>{"*"});
  EXPECT_EQ(db.Scalar("select cpu_allocated from pgfleet.hosts"), "100");
}

// The insert trigger checks a one-row statement in PL/pgSQL expressions and
// a statement of many rows a rule at a time (sql/016_job_insert.sql): the same
// row must be refused with the same message either way, and a good one
// accepted the same way.
TEST(JobsTrigger, OneRowAndManyRowsAreHeldToTheSameRules) {
  TestDatabase db;
  // A deleted formation (with a job, so that its row is kept).
  ASSERT_EQ(
      ErrorOf(db, "insert into pgfleet.jobs (command, formation) values (array['a'], 'gone')"), "");
  ASSERT_EQ(ErrorOf(db, "select pgfleet.delete_formation('gone')"), "");
  // Job ids differ between the two statements; the rest of the message must not.
  auto without_ids = [](std::string text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      out += text[i];
      if (text.compare(i, 4, "job ") == 0 && i + 4 < text.size() &&
          std::isdigit(static_cast<unsigned char>(text[i + 4]))) {
        out += "ob #";
        i += 3;
        while (i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1]))) ++i;
      }
    }
    return out;
  };
  struct Case {
    std::string columns, good, bad, words;
  };
  for (const Case& c : std::vector<Case>{
           {"state", "'pending'", "'succeeded'", "state is set by pgfleet"},
           {"host_id", "null", "'h1'", "host_id is set by pgfleet"},
           {"failures", "0", "5", "failures is set by pgfleet"},
           {"requeue_on_stop", "false", "true", "requeue_on_stop is set by pgfleet"},
           // (An admin's job defaults to network host, a privileged feature.)
           {"privileged, network, run_as", "false, 'none', null", "false, 'none', 'root'",
            "runs the job as root"},
           {"privileged, network", "false, 'none'", "false, 'host'", "network host"},
           {"privileged, network, rootfs", "false, 'none', 'busybox'", "false, 'none', '/'",
            "is a path"},
           {"env", "'{}'::jsonb", "'{\"=x\": \"y\"}'::jsonb", "env names must be non-empty"},
           {"run_as", "null", "repeat('u', 5000)", "user must be at most"},
           {"formation", "'default'", "'gone'", "formation \"gone\" was deleted"},
       }) {
    const std::string one = "insert into pgfleet.jobs (command, " + c.columns +
                            ") values (array['true'], " + c.bad + ")";
    const std::string many = "insert into pgfleet.jobs (command, " + c.columns +
                             ") values (array['true'], " + c.good + "), (array['true'], " + c.bad +
                             "), (array['true'], " + c.good + ")";
    const std::string one_error = ErrorOf(db, one);
    const std::string many_error = ErrorOf(db, many);
    EXPECT_NE(one_error.find(c.words), std::string::npos) << one << ": " << one_error;
    EXPECT_EQ(without_ids(one_error.substr(0, one_error.find('\n'))),
              without_ids(many_error.substr(0, many_error.find('\n'))))
        << c.columns;
    // The good value is good in both forms.
    EXPECT_EQ(ErrorOf(db, "insert into pgfleet.jobs (command, " + c.columns +
                              ") values (array['true'], " + c.good + ")"),
              "")
        << c.columns;
  }
  // What was refused wrote nothing; what was accepted has its created event
  // (and the deleted formation's job).
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs"), 11);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.job_events where kind = 'created'"), 11);
  // A command over the limit, the exact check behind the cheap one.
  const std::string long_command = "(select array_agg('x'::text) from generate_series(1, " +
                                   std::to_string(model::kMaxCommandArgs + 1) + "))";
  const std::string one_error =
      ErrorOf(db, "insert into pgfleet.jobs (command) values (" + long_command + ")");
  EXPECT_NE(one_error.find("command must have at most"), std::string::npos) << one_error;
  EXPECT_EQ(without_ids(one_error.substr(0, one_error.find('\n'))), without_ids([&] {
              std::string e =
                  ErrorOf(db, "insert into pgfleet.jobs (command) values (array['a']), (" +
                                  long_command + ")");
              return e.substr(0, e.find('\n'));
            }()));
  // Unknown formations are created by both, once each.
  ASSERT_EQ(ErrorOf(db, "insert into pgfleet.jobs (command, formation) values (array['a'], 'f1')"),
            "");
  ASSERT_EQ(ErrorOf(db,
                    "insert into pgfleet.jobs (command, formation) values (array['a'], 'f2'), "
                    "(array['b'], 'f2'), (array['c'], 'f1')"),
            "");
  EXPECT_EQ(db.Scalar("select string_agg(name || ':' || kind, ',' order by name) "
                      "from pgfleet.formations where name in ('f1', 'f2')"),
            "f1:batch,f2:batch");
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs"), 15);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.job_events where kind = 'created'"), 15);
}

// --- Documentation ----------------------------------------------------------

TEST(Comments, EveryTableAndColumnIsDocumented) {
  TestDatabase db;
  auto conn = db.Connect();
  pqxx::work tx(*conn);
  auto tables = tx.exec(
      "select c.relname from pg_class c "
      " where c.relnamespace = 'pgfleet'::regnamespace and c.relkind = 'r' "
      "   and coalesce(obj_description(c.oid, 'pg_class'), '') = '' order by 1");
  for (const auto& row : tables)
    ADD_FAILURE() << "table without comment: pgfleet." << row[0].c_str();
  auto columns = tx.exec(
      "select c.relname || '.' || a.attname from pg_class c "
      "  join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped "
      " where c.relnamespace = 'pgfleet'::regnamespace and c.relkind = 'r' "
      "   and coalesce(col_description(c.oid, a.attnum), '') = '' order by 1");
  for (const auto& row : columns)
    ADD_FAILURE() << "column without comment: pgfleet." << row[0].c_str();
  EXPECT_GT(tx.exec1("select count(*) from pg_class where relnamespace = 'pgfleet'::regnamespace "
                     "and relkind = 'r'")[0]
                .as<int>(),
            5);
}

TEST(Comments, EveryViewAndFunctionIsDocumented) {
  TestDatabase db;
  auto conn = db.Connect();
  pqxx::work tx(*conn);
  auto views = tx.exec(
      "select c.relname from pg_class c "
      " where c.relnamespace = 'pgfleet'::regnamespace and c.relkind in ('v', 'm') "
      "   and coalesce(obj_description(c.oid, 'pg_class'), '') = '' order by 1");
  for (const auto& row : views) ADD_FAILURE() << "view without comment: pgfleet." << row[0].c_str();
  auto functions = tx.exec(
      "select p.oid::regprocedure::text from pg_proc p "
      " where p.pronamespace = 'pgfleet'::regnamespace "
      "   and coalesce(obj_description(p.oid, 'pg_proc'), '') = '' order by 1");
  for (const auto& row : functions) ADD_FAILURE() << "function without comment: " << row[0].c_str();
  EXPECT_GE(tx.exec1("select count(*) from pg_class where relnamespace = 'pgfleet'::regnamespace "
                     "and relkind = 'v'")[0]
                .as<int>(),
            4);
}

}  // namespace
}  // namespace pgfleet
