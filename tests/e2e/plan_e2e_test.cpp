// pgfleet plan end to end: on hollow hosts of different labels and sizes (one
// draining), the counts by kind for a job that fits nowhere and the host it
// picks for one that fits; warm-host affinity (a job whose rootfs only one of
// two idle hosts ran lands there, and plan says why); and hostile input:
// another owner's job, a job that does not exist or is not pending, bad
// spec flags, --job beside a spec.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class PlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_.Scalar("update pgfleet.settings set value = '3' where name = 'host_ttl_seconds'");
  }
  void TearDown() override {
    if (HasFailure()) std::cout << cluster_.Logs();
  }
  // The host a job runs or ran on, once it does (waits up to 30 s; "" if not).
  std::string HostOf(const std::string& id) {
    std::string host;
    WaitFor([&] {
      host = db_.Scalar("select host_id from pgfleet.jobs where id = " + id +
                        " and state in ('running', 'succeeded')");
      return !host.empty();
    }, 30s);
    return host;
  }
  TestDatabase db_;
  Cluster cluster_{db_};
};

TEST_F(PlanTest, CountsTheHostsAJobFitsNowhereOnByKindAndNamesTheHostAFittingOneGoesTo) {
  // pa-1, pa-2: zone=a, 4000m, 4096 MiB; pb-1: zone=b, 1024 MiB; pc-1:
  // zone=b, draining.
  cluster_.StartHollowHosts("pa-", 2, {"--cpu", "4000", "--memory", "4096", "--label", "zone=a"});
  cluster_.StartHollowHosts("pb-", 1, {"--cpu", "4000", "--memory", "1024", "--label", "zone=b"});
  cluster_.StartHollowHosts("pc-", 1, {"--cpu", "4000", "--memory", "8192", "--label", "zone=b"});
  ASSERT_TRUE(cluster_.WaitHostsUp(4, 30s));
  auto drain = cluster_.Cli({"drain", "pc-1"});
  ASSERT_EQ(0, drain.exit_code) << drain.err;

  auto nowhere = cluster_.Cli({"plan", "--memory", "2048", "--constraint", "zone=b", "--", "true"});
  EXPECT_EQ(0, nowhere.exit_code) << nowhere.err;
  EXPECT_EQ(
      "would not place now: no host has 2048 MiB memory; largest has 1024\n"
      "not on 4 hosts: 2 filtered by constraint zone=b, 1 lacked memory (largest free 1024 MiB), "
      "1 draining\n",
      nowhere.out);
  // Nothing was submitted.
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs"));

  auto fits = cluster_.Cli({"plan", "--memory", "512", "--constraint", "zone=a", "--", "true"});
  EXPECT_EQ(0, fits.exit_code) << fits.err;
  EXPECT_EQ(
      "would place on pa-1 (bin-pack: fullest of 2 after placing (7%))\n"
      "not on 3 hosts: 1 filtered by constraint zone=a, 1 ranked lower, 1 draining\n",
      fits.out);

  // A pending job: the same answer by --job, and in SQL by pgfleet.explain.
  auto run = cluster_.Cli({"run", "--memory", "2048", "--constraint", "zone=b", "--", "true"});
  ASSERT_EQ(0, run.exit_code) << run.err;
  std::string id = run.out.substr(0, run.out.find('\n'));
  auto planned = cluster_.Cli({"plan", "--job", id});
  EXPECT_EQ(0, planned.exit_code) << planned.err;
  EXPECT_EQ(nowhere.out, planned.out);
  auto json = cluster_.Cli({"plan", "--job", id, "--json"});
  EXPECT_NE(std::string::npos, json.out.find("\"largest_free\": 1024")) << json.out;
  EXPECT_EQ("1024", db_.Scalar("select e -> 'largest_free' from jsonb_array_elements("
                               "pgfleet.explain(" + id + "::bigint) -> 'not_on') e"
                               " where e ->> 'kind' = 'memory'"));
}

TEST_F(PlanTest, AJobWhoseRootfsOnlyOneOfTwoIdleHostsRanLandsThere) {
  cluster_.StartScheduler("s1", {"--host-ttl", "3"});
  cluster_.StartHollowHosts("wa-", 1, {"--cpu", "4000", "--memory", "4096", "--label", "name=wa"});
  cluster_.StartHollowHosts("wb-", 1, {"--cpu", "4000", "--memory", "4096", "--label", "name=wb"});
  ASSERT_TRUE(cluster_.WaitHostsUp(2, 30s));
  // Without warmth equally idle hosts go to the lower id: wa-1.
  auto cold = cluster_.Cli({"plan", "--rootfs", "alpine", "--", "true"});
  EXPECT_EQ(0, cold.exit_code) << cold.err;
  EXPECT_EQ(0u, cold.out.find("would place on wa-1 (cold: no feasible host ran rootfs alpine;"))
      << cold.out;

  // wb-1 runs a job of rootfs alpine; hostd reports it warm.
  auto first = cluster_.Cli({"run", "--rootfs", "alpine", "--constraint", "name=wb", "--wait",
                             "--", "true"});
  ASSERT_EQ(0, first.exit_code) << first.err;
  ASSERT_TRUE(WaitFor([&] {
    return db_.Scalar("select 'alpine' = any(names) from pgfleet.host_rootfs where host_id = 'wb-1'") == "t";
  }, 20s));

  auto warm = cluster_.Cli({"plan", "--rootfs", "alpine", "--", "true"});
  EXPECT_EQ(0, warm.exit_code) << warm.err;
  EXPECT_EQ(0u, warm.out.find("would place on wb-1 (warm: ran rootfs alpine;")) << warm.out;

  auto second = cluster_.Cli({"run", "--rootfs", "alpine", "--", "true"});
  ASSERT_EQ(0, second.exit_code) << second.err;
  EXPECT_EQ("wb-1", HostOf(second.out.substr(0, second.out.find('\n'))));
  // Another rootfs is cold everywhere: the lower id, as before.
  auto other = cluster_.Cli({"run", "--rootfs", "debian", "--", "true"});
  ASSERT_EQ(0, other.exit_code) << other.err;
  EXPECT_EQ("wa-1", HostOf(other.out.substr(0, other.out.find('\n'))));
}

// A host that lacks room where stopping lower-priority preemptible jobs
// would make it is counted by how many it would need; plan (the core) and
// pgfleet.explain (the SQL) say the same, and a job of no higher priority
// than the jobs running is told only that hosts lack room.
TEST_F(PlanTest, CountsTheHostsWherePreemptionWouldMakeRoomByHowManyJobs) {
  Process& scheduler = cluster_.StartScheduler("s1", {"--host-ttl", "3"});
  for (const char* name : {"qa", "qc", "qb"}) {
    cluster_.StartHollowHosts(std::string(name) + "-", 1,
                              {"--cpu", "2000", "--memory", "2048", "--label", "pool=q",
                               "--label", std::string("name=") + name});
  }
  ASSERT_TRUE(cluster_.WaitHostsUp(3, 30s));
  // qa-1 and qc-1: two preemptible jobs of priority 10 each; qb-1: one that
  // is not preemptible.
  db_.Scalar(
      "insert into pgfleet.jobs (command, cpu, memory, priority, preemptible, constraints, env)"
      " select '{true}', c, c, 10, p, jsonb_build_object('name', h),"
      "        '{\"PGFLEET_SIM_SECONDS\": \"600\"}'"
      "   from (values ('qa', 1000, true), ('qa', 1000, true), ('qc', 1000, true),"
      "                ('qc', 1000, true), ('qb', 2000, false)) v(h, c, p) returning 1");
  ASSERT_TRUE(WaitFor([&] {
    return db_.Count("select count(*) from pgfleet.jobs where state = 'running'") == 5;
  }, 30s)) << db_.Scalar("select string_agg(id || ' ' || state || ' ' || coalesce(error, ''), '; ') from pgfleet.jobs");
  scheduler.Stop();  // nothing preempts while we look

  auto whole = cluster_.Cli({"plan", "--priority", "90", "--cpu", "2000", "--memory", "2048",
                             "--constraint", "pool=q", "--", "true"});
  EXPECT_EQ(0, whole.exit_code) << whole.err;
  EXPECT_NE(std::string::npos,
            whole.out.find("not on 3 hosts: 2 would need preemption of 2 jobs, 1 lacked cpu "
                           "(largest free 0m)\n"))
      << whole.out;
  auto half = cluster_.Cli({"plan", "--priority", "90", "--cpu", "1000", "--memory", "1024",
                            "--json", "--", "true"});
  EXPECT_EQ(0, half.exit_code) << half.err;
  EXPECT_NE(std::string::npos, half.out.find("\"reason\": \"2 would need preemption of 1 job\""))
      << half.out;
  EXPECT_NE(std::string::npos, half.out.find("\"victims\": 1")) << half.out;
  EXPECT_EQ("2 1", db_.Scalar(
                       "select e ->> 'hosts' || ' ' || (e ->> 'detail') from jsonb_array_elements("
                       "pgfleet.explain('{\"command\": [\"true\"], \"priority\": 90, \"cpu\": 1000,"
                       " \"memory\": 1024}'::jsonb) -> 'not_on') e where e ->> 'kind' = 'preemption'"));
  // Of equal priority: no victims anywhere.
  auto equal = cluster_.Cli({"plan", "--priority", "10", "--cpu", "1000", "--memory", "1024",
                             "--", "true"});
  EXPECT_EQ(0, equal.exit_code) << equal.err;
  EXPECT_EQ(std::string::npos, equal.out.find("preemption")) << equal.out;
  EXPECT_NE(std::string::npos, equal.out.find("3 lacked cpu")) << equal.out;
  EXPECT_EQ(5, db_.Count("select count(*) from pgfleet.jobs"));  // plan submitted nothing
}

TEST_F(PlanTest, HostileInputGetsClearErrorsAndChangesNothing) {
  cluster_.StartHollowHosts("ph-", 1, {"--cpu", "4000", "--memory", "4096"});
  ASSERT_TRUE(cluster_.WaitHostsUp(1, 30s));
  const std::string alice = db_.DsnAs(db_.CreateLogin("alice", {"pgfleet_submitter"}));
  const std::string bob = db_.DsnAs(db_.CreateLogin("bob", {"pgfleet_submitter"}));
  auto run = cluster_.CliAs(alice, {"run", "--", "true"});
  ASSERT_EQ(0, run.exit_code) << run.err;
  const std::string id = run.out.substr(0, run.out.find('\n'));

  // Alice plans her own pending job; Bob is told it does not exist, as for
  // an id nobody has.
  EXPECT_EQ(0, cluster_.CliAs(alice, {"plan", "--job", id}).exit_code);
  auto others = cluster_.CliAs(bob, {"plan", "--job", id});
  EXPECT_EQ(1, others.exit_code);
  EXPECT_NE(std::string::npos, others.err.find("job " + id + " does not exist, or is not yours"))
      << others.err;
  auto missing = cluster_.CliAs(bob, {"plan", "--job", "987654"});
  EXPECT_EQ(1, missing.exit_code);
  EXPECT_NE(std::string::npos, missing.err.find("job 987654 does not exist, or is not yours"))
      << missing.err;

  // Not pending.
  ASSERT_EQ(0, cluster_.CliAs(alice, {"stop", id}).exit_code);
  auto stopped = cluster_.CliAs(alice, {"plan", "--job", id});
  EXPECT_EQ(1, stopped.exit_code);
  EXPECT_NE(std::string::npos, stopped.err.find("is cancelled, not pending")) << stopped.err;

  // Bad flags: usage errors naming the rule, exit 2.
  for (const auto& [args, words] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"plan", "--job", "abc"}, "JOB"},
           {{"plan", "--job=-4"}, "JOB"},
           {{"plan", "--job", id, "--cpu", "100"}, "give either --job or a spec (--cpu"},
           {{"plan", "--job", id, "--", "true"}, "give either --job or a spec"},
           {{"plan"}, "expected --job JOB, or a command after --"},
           {{"plan", "--cpu", "-5", "--", "true"}, "cpu"},
           {{"plan", "--memory", "99999999999", "--", "true"}, "memory"},
           {{"plan", "--constraint", "zone", "--", "true"}, "--constraint"}}) {
    auto r = cluster_.CliAs(alice, args);
    EXPECT_EQ(2, r.exit_code) << ::testing::PrintToString(args) << r.err;
    EXPECT_NE(std::string::npos, r.err.find(words)) << ::testing::PrintToString(args) << r.err;
  }
  // A spec the database refuses (an unprivileged rootfs path) is refused as
  // `run` refuses it, naming the field; nothing is left inserted.
  auto path = cluster_.CliAs(alice, {"plan", "--rootfs", "/srv/root", "--", "true"});
  EXPECT_EQ(1, path.exit_code);
  EXPECT_NE(std::string::npos, path.err.find("rootfs /srv/root is a path")) << path.err;
  EXPECT_EQ(1, db_.Count("select count(*) from pgfleet.jobs"));
}

}  // namespace
}  // namespace pgfleet::testing
