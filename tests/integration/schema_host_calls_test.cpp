// What a host's calls do in SQL, against the real server: heartbeat()
// records the host's condition (clearing it wakes sleeping schedulers) and
// answers the digest of the host's live attempts and how many to stop;
// report_jobs() wakes schedulers for freed resources unless its caller does.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/model/constants.h"
#include "schema_probes.h"

namespace pgfleet::testing_schema {
namespace {

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

}  // namespace
}  // namespace pgfleet::testing_schema
