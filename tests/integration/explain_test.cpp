// pgfleet.explain (sql/025_explain.sql) against the placement core
// (core/placement/explain.h) on the same fleets: the SQL verdicts are the
// core's filters written again, so over a set of random fleets both must
// name the same host and count the same kinds. And who may ask: a
// submitter explains only its own jobs; a spec is refused as its insert
// would be and leaves nothing.

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <tuple>

#include "cli/plan_queries.h"
#include "cli/queries.h"
#include "core/placement/explain.h"
#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

using Counts = std::map<std::tuple<std::string, std::string>, std::pair<int, long long>>;

TEST(Explain, TheSqlVerdictsAreThePlacementCoresOnRandomFleets) {
  TestDatabase db;
  auto conn = db.Connect();
  cli::PrepareQueries(*conn);
  std::mt19937 rng(380);
  int preempting = 0;  // rounds' counts of kind preemption: the fleets do exercise it
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  for (int round = 0; round < 150; ++round) {
    pqxx::work tx(*conn);
    tx.exec0("delete from pgfleet.hosts");
    const int n = 1 + pick(6);
    for (int i = 0; i < n; ++i) {
      const std::string id = "h" + std::to_string(i);
      const int cpu = 1000 * (1 + pick(2)), memory = 1000 * (1 + pick(2));
      tx.exec_params0(
          "insert into pgfleet.hosts (id, api_url, cpu, memory, cpu_allocated, memory_allocated,"
          " labels, driver, state, admitted, networks, port_range)"
          " values ($1, 'http://127.0.0.1:1', $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10::text[],"
          " int4range(20000, 20000 + $11))",
          id, cpu, memory, pick(cpu + 1), pick(memory + 1),
          pick(2) ? R"({"zone": "a"})" : R"({"zone": "b", "disk": "ssd"})",
          pick(5) ? "container" : "process", pick(6) ? "up" : "draining", pick(8) > 0,
          pick(2) ? "{host,none,bridge}" : "{host,none}", 1 + pick(2));
      tx.exec_params0(
          "insert into pgfleet.host_heartbeats (host_id, generation, condition, last_seen)"
          " values ($1, 1, $2, now() - $3 * interval '1 hour')",
          id, pick(6) ? std::optional<std::string>() : std::optional<std::string>("disk pressure: x"),
          pick(10) ? 0 : 1);
      if (pick(3) == 0) {
        tx.exec_params0("insert into pgfleet.job_ports (host_id, port, job_id, attempt, name)"
                        " values ($1, 20000, 1, 1, 'p')", id);
      }
      if (pick(2)) {
        tx.exec_params0("insert into pgfleet.host_rootfs (host_id, names) values ($1, '{r}')", id);
      }
      // Jobs running there that a job could preempt or not (priority,
      // preemptible), and more than the 12 candidates searched sometimes.
      // Rows only (no triggers): the host's allocation is the fleet's own.
      tx.exec0("set local session_replication_role = replica");
      for (int k = pick(3) == 0 ? 14 : pick(4); k > 0; --k) {
        tx.exec_params0(
            "insert into pgfleet.jobs (command, cpu, memory, priority, preemptible, state, host_id,"
            " attempt) values (array['true'], $1, $2, $3, $4, $5, $6, 1)",
            50 * (1 + pick(12)), 50 * (1 + pick(12)), pick(3) == 0 ? 95 : 10 + 10 * pick(3),
            pick(4) > 0, pick(5) ? "running" : "assigned", id);
      }
      tx.exec0("set local session_replication_role = origin");
    }
    cli::Planned p;
    p.request.cpu = 1 + pick(1200);
    p.request.memory = 1 + pick(1200);
    if (pick(2)) p.request.constraints = {{"zone", "a"}};
    if (pick(3) == 0) p.request.constraints = {{"disk", "ssd"}, {"zone", "b"}};
    p.request.privileged = pick(4) == 0;
    p.request.bridge = pick(4) == 0;
    if (pick(3) == 0) p.request.ports = {{"p", 0}};
    if (pick(4) == 0) p.request.ports = {{"q", 20000 + pick(3)}};
    if (pick(5) == 0) p.request.pinned_host = "h" + std::to_string(pick(7));
    if (pick(2)) p.request.rootfs = "r";
    p.request.priority = pick(3) ? 90 : 30;
    p.formation = "default";
    const json req = {{"cpu", p.request.cpu},
                      {"memory", p.request.memory},
                      {"constraints", p.request.constraints},
                      {"privileged", p.request.privileged},
                      {"pinned_host", p.request.pinned_host},
                      {"bridge", p.request.bridge},
                      {"ports", p.request.ports},
                      {"rootfs", p.request.rootfs},
                      {"formation", p.formation},
                      {"spread", ""},
                      {"priority", p.request.priority}};
    const json sql = json::parse(
        tx.exec_params1("select pgfleet.explain_request($1::jsonb)::text", req.dump())[0]
            .as<std::string>());

    const cli::Fleet fleet = cli::ReadPlacementHosts(tx, p);
    placement::Explanation e =
        placement::ExplainJob(p.request, fleet.hosts, fleet.running, &fleet.preemption);
    for (const auto& [why, count] : fleet.not_up) placement::AddNotUp(&e, why, count);
    tx.abort();
    for (const auto& c : e.rejected) preempting += c.kind == placement::Rejection::kPreemption;

    SCOPED_TRACE("round " + std::to_string(round) + ": " + req.dump() + " -> " + sql.dump());
    EXPECT_EQ(sql["would_place_on"].is_null() ? "" : sql["would_place_on"].get<std::string>(),
              e.host);
    EXPECT_EQ(sql["feasible"].get<int>(), e.feasible);
    Counts from_sql, from_core;
    for (const auto& c : sql["not_on"]) {
      from_sql[{c["kind"].get<std::string>(), c["detail"].get<std::string>()}] = {
          c["hosts"].get<int>(), c.value("largest_free", 0LL)};
    }
    for (const auto& c : e.rejected) {
      from_core[{placement::KindName(c.kind), c.detail}] = {c.hosts, c.largest_free};
    }
    EXPECT_EQ(from_sql, from_core);
  }
  EXPECT_GE(preempting, 10);
}

TEST(Explain, ASubmitterExplainsOnlyItsOwnPendingJobsAndASpecLeavesNothing) {
  TestDatabase db;
  Sql admin(db);
  const std::string alice = db.CreateLogin("alice", {"pgfleet_submitter"});
  const std::string bob = db.CreateLogin("bob", {"pgfleet_submitter"});
  Sql as_alice(db.DsnAs(alice)), as_bob(db.DsnAs(bob));
  admin.RegisterHost("h1", 1000, 1000);
  admin.Exec("update pgfleet.hosts set driver = 'container'");
  const long long job = as_alice.Submit(100);
  const std::string mine = as_alice.Str("select pgfleet.explain($1::bigint)::text", job);
  EXPECT_NE(std::string::npos, mine.find("\"would_place_on\": \"h1\"")) << mine;

  const std::string refused = "does not exist, or is not yours";
  EXPECT_NE(std::string::npos,
            as_bob.ErrorOf("select pgfleet.explain($1::bigint)", job).find(refused));
  EXPECT_NE(std::string::npos, as_bob.ErrorOf("select pgfleet.explain(987654::bigint)").find(refused));
  EXPECT_NE(std::string::npos,
            as_bob.ErrorOf("select pgfleet.placement_request($1)", job).find(refused));

  admin.Exec("update pgfleet.jobs set desired_state = 'stop', state = 'cancelled' where id = $1", job);
  EXPECT_NE(std::string::npos, as_alice.ErrorOf("select pgfleet.explain($1::bigint)", job)
                                   .find("is cancelled, not pending"));

  // A spec: answered as for a job, nothing inserted; refused as an insert.
  const long long before = admin.Num("select count(*) from pgfleet.jobs");
  const std::string spec = as_bob.Str(
      R"(select pgfleet.explain('{"command": ["true"], "cpu": 5000}'::jsonb)::text)");
  EXPECT_NE(std::string::npos, spec.find(R"("kind": "cpu")")) << spec;
  EXPECT_EQ(before, admin.Num("select count(*) from pgfleet.jobs"));
  EXPECT_NE(std::string::npos,
            as_bob.ErrorOf(R"(select pgfleet.explain('{"command": ["true"], "cpu": -1}'::jsonb))")
                .find("cpu must be > 0"));
  EXPECT_NE(std::string::npos,
            as_bob.ErrorOf(R"(select pgfleet.explain('{"command": ["true"], "bogus": 1}'::jsonb))")
                .find("spec: bogus is not a field"));
  EXPECT_NE(std::string::npos,
            as_bob.ErrorOf(R"(select pgfleet.explain('{"id": 5, "command": ["true"]}'::jsonb))")
                .find("spec: id is not a field"));
  EXPECT_NE(std::string::npos,
            as_bob.ErrorOf("select pgfleet.explain('[1]'::jsonb)").find("spec must be a JSON object"));
  EXPECT_NE(std::string::npos,
            as_bob.ErrorOf(R"(select pgfleet.explain('{"command": ["true"], "owner": "alice"}'::jsonb))")
                .find("owner"));
  EXPECT_EQ(before, admin.Num("select count(*) from pgfleet.jobs"));
}

TEST(Explain, ReportRootfsWarmIsBoundedAndWrittenOnlyWhenItChanges) {
  TestDatabase db;
  Sql sql(db);
  const long long generation = sql.RegisterHost("h1", 1000, 1000);
  auto version = [&] { return sql.Num("select config_version from pgfleet.hosts where id = 'h1'"); };
  const long long v0 = version();
  sql.Exec("select pgfleet.report_rootfs_warm('h1', $1, '{alpine,debian}')", generation);
  EXPECT_EQ(version(), v0 + 1);
  EXPECT_EQ("{alpine,debian}", sql.Str("select names from pgfleet.host_rootfs where host_id = 'h1'"));
  sql.Exec("select pgfleet.report_rootfs_warm('h1', $1, '{alpine,debian}')", generation);
  EXPECT_EQ(version(), v0 + 1);  // unchanged: nothing written
  // An old generation says nothing.
  sql.Exec("select pgfleet.report_rootfs_warm('h1', $1, '{old}')", generation - 1);
  EXPECT_EQ("{alpine,debian}", sql.Str("select names from pgfleet.host_rootfs where host_id = 'h1'"));
  EXPECT_NE(std::string::npos,
            sql.ErrorOf("select pgfleet.report_rootfs_warm('h1', $1, array_fill('x'::text, array[17]))",
                        generation)
                .find("at most 16 names (got 17)"));
  EXPECT_NE(std::string::npos,
            sql.ErrorOf("select pgfleet.report_rootfs_warm('h1', $1, array[repeat('x', 5000)])",
                        generation)
                .find("each name must be 1 to"));
  EXPECT_NE(std::string::npos,
            sql.ErrorOf("select pgfleet.report_rootfs_warm('h1', $1, array[null::text])", generation)
                .find("each name must be 1 to"));
  EXPECT_NE(std::string::npos,
            sql.ErrorOf("select pgfleet.report_rootfs_warm('h1', $1, null)", generation)
                .find("names must be an array"));
  // Another host's login may not write it.
  const std::string other = db.CreateLogin("other", {"pgfleet_host"});
  Sql as_other(db.DsnAs(other));
  EXPECT_NE(std::string::npos,
            as_other.ErrorOf("select pgfleet.report_rootfs_warm('h1', $1, '{x}')", generation)
                .find("may not act for host h1"));
  // Submitters do not read which root filesystems hosts ran.
  const std::string alice = db.CreateLogin("alice", {"pgfleet_submitter"});
  Sql as_alice(db.DsnAs(alice));
  EXPECT_NE(std::string::npos,
            as_alice.ErrorOf("select * from pgfleet.host_rootfs").find("permission denied"));
}

}  // namespace
}  // namespace pgfleet::integration
