// A formation's max_running and an owner's quota (pgfleet.owner_quotas)
// enforced by pgfleet.assign_jobs against the real server: what an owner
// holds is counted from its live jobs, so it returns to zero whatever ends
// them (exit, lost host, cancel) and is never negative; the quota's row
// held by another transaction is skipped, not waited for; concurrent
// assigners never exceed it; hostile rows are refused naming the rule.

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

long long SubmitAs(Sql& sql, int cpu, const std::string& formation = "default") {
  return sql.Num("select pgfleet.submit(array['true'], formation => $1, cpu => $2, memory => 64)",
                 formation, cpu);
}

std::string Usage(Sql& admin, const std::string& owner) {
  return admin.Str(
      "select cpu_in_use || '/' || memory_in_use || '/' || running"
      " from pgfleet.owner_quota_status where owner = $1",
      owner);
}

TEST(OwnerQuota, AssignStopsAtTheQuotaAndUsageReturnsToZeroWhateverEndsTheJobs) {
  TestDatabase db;
  Sql admin(db);
  const std::string a = db.CreateLogin("alice", {"pgfleet_submitter"});
  const std::string b = db.CreateLogin("bob", {"pgfleet_submitter"});
  Sql alice(db.DsnAs(a)), bob(db.DsnAs(b));
  long long gen = admin.RegisterHost("h1", 100000, 100000);
  admin.Exec("insert into pgfleet.owner_quotas (owner, max_cpu) values ($1, 1000)", a);
  std::vector<long long> jobs;
  for (int i = 0; i < 5; ++i) jobs.push_back(SubmitAs(alice, 400));
  long long other = SubmitAs(bob, 5000);

  // Two fit (800 of 1000m); bob, without a quota, is not held.
  EXPECT_EQ(admin.Assign({jobs[0], jobs[1], jobs[2], other}, "h1").size(), 3u);
  EXPECT_EQ(admin.State(jobs[2]), "pending");
  EXPECT_EQ(Usage(admin, a), "800/128/2");
  EXPECT_EQ(admin.Str("select waiting from pgfleet.owner_quota_status where owner = $1", a), "0");

  // Exit: room for one more.
  ASSERT_TRUE(admin.ReportOne("h1", gen, Exited(jobs[0], 1, 0)));
  EXPECT_EQ(Usage(admin, a), "400/64/1");
  EXPECT_EQ(admin.Assign({jobs[2], jobs[3]}, "h1").size(), 1u);
  EXPECT_EQ(admin.State(jobs[2]), "assigned");
  EXPECT_EQ(Usage(admin, a), "800/128/2");

  // Lost attempt (back to pending) and a cancel: nothing left in use.
  ASSERT_TRUE(admin.ReportOne("h1", gen, Lost(jobs[1], 1)));
  EXPECT_EQ(admin.State(jobs[1]), "pending");
  alice.Exec("select pgfleet.cancel($1)", jobs[2]);
  ASSERT_TRUE(admin.ReportOne("h1", gen, Exited(jobs[2], 1, 143)));
  EXPECT_EQ(admin.State(jobs[2]), "cancelled");
  EXPECT_EQ(Usage(admin, a), "0/0/0");
  // A lost host's jobs too.
  EXPECT_EQ(admin.Assign({jobs[1], jobs[3]}, "h1").size(), 2u);
  EXPECT_EQ(Usage(admin, a), "800/128/2");
  admin.Exec("update pgfleet.host_heartbeats set last_seen = now() - interval '1 hour'");
  admin.Exec("select pgfleet.sweep_lost_hosts(1, '-infinity')");
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.jobs where state in ('assigned', 'running')"
                      " and owner = $1",
                      a),
            0);
  EXPECT_EQ(Usage(admin, a), "0/0/0");
  EXPECT_EQ(admin.Drift(), 0);
}

TEST(OwnerQuota, RunningAndMemoryLimitsHoldAndAQuotaRowHeldElsewhereIsSkippedNotWaitedFor) {
  TestDatabase db;
  Sql admin(db);
  const std::string a = db.CreateLogin("alice", {"pgfleet_submitter"});
  Sql alice(db.DsnAs(a));
  admin.RegisterHost("h1", 100000, 100000);
  admin.Exec(
      "insert into pgfleet.owner_quotas (owner, max_running, max_memory) values ($1, 3, 150)", a);
  std::vector<long long> jobs;
  for (int i = 0; i < 4; ++i) jobs.push_back(SubmitAs(alice, 10));
  // Memory binds first (64 MiB each: two of 150).
  EXPECT_EQ(admin.Assign(jobs, "h1").size(), 2u);
  admin.Exec("update pgfleet.owner_quotas set max_memory = null where owner = $1", a);
  EXPECT_EQ(admin.Assign(jobs, "h1").size(), 1u);  // max_running 3
  admin.Exec("update pgfleet.owner_quotas set max_running = 10 where owner = $1", a);
  {
    auto c = db.Connect();
    pqxx::work held(*c);
    held.exec("select * from pgfleet.owner_quotas for update");
    admin.Exec("select set_config('lock_timeout', '2s', false)");
    EXPECT_TRUE(admin.Assign(jobs, "h1").empty());  // skipped at once, not a lock timeout
    held.commit();
  }
  EXPECT_EQ(admin.Assign(jobs, "h1").size(), 1u);
  EXPECT_EQ(Usage(admin, a), "40/256/4");
}

// Schedulers placing different formations of one owner at once, each on its
// own host: the owner's quota holds whatever the interleaving.
TEST(OwnerQuota, ConcurrentAssignersNeverExceedTheQuota) {
  TestDatabase db;
  Sql admin(db);
  const std::string a = db.CreateLogin("alice", {"pgfleet_submitter"});
  Sql alice(db.DsnAs(a));
  admin.Exec("insert into pgfleet.owner_quotas (owner, max_running) values ($1, 7)", a);
  constexpr int kThreads = 4, kJobsEach = 10;
  std::vector<std::vector<long long>> jobs(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    admin.RegisterHost("h" + std::to_string(t), 100000, 100000);
    for (int i = 0; i < kJobsEach; ++i) {
      jobs[t].push_back(SubmitAs(alice, 10, "f" + std::to_string(t)));
    }
  }
  std::atomic<int> assigned{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Sql s(db);
      for (long long j : jobs[t]) {
        assigned += static_cast<int>(s.Assign({j}, "h" + std::to_string(t)).size());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(assigned.load(), 7);
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.jobs where state = 'assigned'"),
            assigned.load());
  // Skipped rows were left to a later pass: one more round fills the quota.
  for (int t = 0; t < kThreads; ++t) admin.Assign(jobs[t], "h" + std::to_string(t));
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.jobs where state = 'assigned'"), 7);
}

TEST(MaxRunning, AssignKeepsAFormationWithinItsLimitInPriorityOrder) {
  TestDatabase db;
  Sql admin(db);
  long long gen = admin.RegisterHost("h1", 100000, 100000);
  admin.Exec("insert into pgfleet.formations (name, max_running) values ('lim', 2)");
  std::vector<long long> jobs;
  for (int i = 0; i < 4; ++i) jobs.push_back(admin.Submit(10, 64, 1, "lim"));
  admin.Exec("update pgfleet.jobs set priority = 90 where id = $1", jobs[3]);
  long long free_job = admin.Submit(10);
  auto got = admin.Assign({jobs[0], jobs[1], jobs[2], jobs[3], free_job}, "h1");
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(admin.State(jobs[3]), "assigned");  // the highest priority first
  EXPECT_EQ(admin.State(jobs[0]), "assigned");
  EXPECT_EQ(admin.State(free_job), "assigned");
  EXPECT_TRUE(admin.Assign({jobs[1], jobs[2]}, "h1").empty());
  ASSERT_TRUE(admin.ReportOne("h1", gen, Exited(jobs[0], 1, 0)));
  EXPECT_EQ(admin.Assign({jobs[1], jobs[2]}, "h1").size(), 1u);
  // Raised: room for the last.
  admin.Exec("update pgfleet.formations set max_running = 3 where name = 'lim'");
  EXPECT_EQ(admin.Assign({jobs[1], jobs[2]}, "h1").size(), 1u);
  EXPECT_EQ(admin.Drift(), 0);
}

TEST(Limits, HostileMaxRunningAndQuotaRowsAreRefusedNamingTheRuleAndChangeNothing) {
  TestDatabase db;
  Sql admin(db);
  const std::string a = db.CreateLogin("alice", {"pgfleet_submitter"});
  Sql alice(db.DsnAs(a));
  admin.Exec("insert into pgfleet.formations (name) values ('f')");
  for (auto [sql, words] : std::vector<std::pair<std::string, std::string>>{
           {"update pgfleet.formations set max_running = 0",
            "max_running must be between 1 and 100000"},
           {"update pgfleet.formations set max_running = -5",
            "max_running must be between 1 and 100000"},
           {"update pgfleet.formations set max_running = 100001",
            "max_running must be between 1 and 100000"},
           {"update pgfleet.formations set max_running = 'x'",
            "invalid input syntax for type integer"},
           {"update pgfleet.formations set max_running = 99999999999", "out of range"},
           {"select pgfleet.update_formation('f', '{\"max_running\": \"lots\"}')", "max_running:"},
           {"select pgfleet.update_formation('f', '{\"max_running\": 0}')",
            "max_running must be between 1 and 100000"},
           {"insert into pgfleet.owner_quotas (owner, max_cpu) values ('nobody_here', 10)",
            "owner must be an existing role (got \"nobody_here\")"},
           {"insert into pgfleet.owner_quotas (owner) values ('" + a + "')",
            "needs at least one of max_cpu, max_memory, max_running"},
           {"insert into pgfleet.owner_quotas (owner, max_cpu) values ('" + a + "', 0)",
            "max_cpu must be between 1 and 2000000000 millicores"},
           {"insert into pgfleet.owner_quotas (owner, max_memory) values ('" + a + "', -1)",
            "max_memory must be between 1 and 2000000000 MiB"},
           {"insert into pgfleet.owner_quotas (owner, max_running) values ('" + a + "', 0)",
            "max_running must be between 1 and 10000000"},
           {"insert into pgfleet.owner_quotas (owner, max_cpu) values ('" + a + "', 2147483648)",
            "out of range"},
           {"insert into pgfleet.owner_quotas (owner, max_cpu) values ('" + a + "', 'lots')",
            "invalid input syntax for type integer"},
       }) {
    std::string e = admin.ErrorOf(sql);
    EXPECT_NE(e.find(words), std::string::npos) << sql << ": " << e;
  }
  EXPECT_EQ(admin.Str("select max_running from pgfleet.formations where name = 'f'"), "");
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.owner_quotas"), 0);
  // Only operators write quotas; a submitter sees its own usage only.
  EXPECT_NE(
      alice.ErrorOf("insert into pgfleet.owner_quotas (owner, max_cpu) values ($1, 999999)", a)
          .find("permission denied"),
      std::string::npos);
  EXPECT_NE(
      alice.ErrorOf("update pgfleet.formations set max_running = 1").find("permission denied"),
      std::string::npos);
  const std::string b = db.CreateLogin("bob", {"pgfleet_submitter"});
  admin.Exec("insert into pgfleet.owner_quotas (owner, max_cpu) values ($1, 10), ($2, 10)", a, b);
  EXPECT_EQ(alice.Str("select string_agg(owner, ',') from pgfleet.owner_quota_status"), a);
}

}  // namespace
}  // namespace pgfleet::integration
