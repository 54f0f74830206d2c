// Ports and endpoints in SQL (migration 0033, sql/013, 023, 095) against the
// real server: assign_jobs gives a host port once and only as the job asks,
// every end of an attempt frees it, submitters cannot set what hosts and
// schedulers own, endpoints show only what the caller may see, and a
// watcher hears one notification per formation per transaction.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "core/model/constants.h"
#include "tests/integration/schema_probes.h"
#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

using testing_schema::CollectFor;
using testing_schema::Collector;

// A container host with the bridge and ports 20000..20000+count-1.
long long BridgeHost(Sql& sql, const std::string& id, int count) {
  return sql.Num(
      "select pgfleet.register_host($1, 'http://127.0.0.5:7001', 10000, 10000, '{}', 'container',"
      " null, int4range(20000, 20000 + $2), '{host,none,bridge}', null)",
      id, count);
}

long long PortJob(Sql& sql, const std::string& ports, const std::string& network = "bridge",
                  const std::string& formation = "default") {
  return sql.Num(
      "insert into pgfleet.jobs (command, formation, network, ports)"
      " values ('{true}', $3, $2, $1::jsonb) returning id",
      ports, network, formation);
}

// assign_jobs with one plan entry; returns how many were assigned.
long long AssignWith(Sql& sql, long long job, const std::string& host, const std::string& ports) {
  json e = {{"job", job}, {"host", host}};
  if (!ports.empty()) e["ports"] = json::parse(ports);
  return sql.Num("select count(*) from pgfleet.assign_jobs($1::jsonb)", json::array({e}).dump());
}

std::string Held(Sql& sql) {
  return sql.Str(
      "select coalesce(string_agg(job_id || ':' || name || '=' || port, ' ' order by port), '')"
      " from pgfleet.job_ports");
}

TEST(Ports, AssignJobsGivesAPortOnceAndOnlyAsTheJobAsks) {
  TestDatabase db;
  Sql sql(db);
  BridgeHost(sql, "h1", 3);  // 20000..20002
  long long a = PortJob(sql, R"({"http": 0, "admin": 20002})");
  // Wrong plans change nothing: a name missing, a name not asked, port 0
  // given outside the range, a named port given another number, one port twice.
  EXPECT_EQ(AssignWith(sql, a, "h1", ""), 0);
  EXPECT_EQ(AssignWith(sql, a, "h1", R"({"http": 20000})"), 0);
  EXPECT_EQ(AssignWith(sql, a, "h1", R"({"http": 20000, "admin": 20002, "x": 20001})"), 0);
  EXPECT_EQ(AssignWith(sql, a, "h1", R"({"http": 30000, "admin": 20002})"), 0);
  EXPECT_EQ(AssignWith(sql, a, "h1", R"({"http": 20000, "admin": 20001})"), 0);
  EXPECT_EQ(AssignWith(sql, a, "h1", R"({"http": 20002, "admin": 20002})"), 0);
  EXPECT_EQ(AssignWith(sql, a, "h1", R"({"http": "20000", "admin": 20002})"), 0);
  EXPECT_EQ(sql.State(a), "pending");
  EXPECT_EQ(Held(sql), "");
  EXPECT_EQ(sql.Allocated("h1"), "0/0");

  EXPECT_EQ(AssignWith(sql, a, "h1", R"({"http": 20000, "admin": 20002})"), 1);
  EXPECT_EQ(Held(sql), std::to_string(a) + ":http=20000 " + std::to_string(a) + ":admin=20002");
  EXPECT_EQ(sql.Str("select host_ports::text from pgfleet.jobs where id = $1", a),
            R"({"http": 20000, "admin": 20002})");
  // The spec the host is sent names the given ports.
  EXPECT_EQ(sql.Str("select pgfleet.job_spec(j) -> 'ports' ->> 'http' from pgfleet.jobs j"
                    " where id = $1", a),
            "20000");

  // Another job cannot have a held port, and the host's whole plan waits.
  long long b = PortJob(sql, R"({"http": 0})");
  long long c = sql.Submit(100);
  json plan = json::array({{{"job", b}, {"host", "h1"}, {"ports", {{"http", 20000}}}},
                           {{"job", c}, {"host", "h1"}}});
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.assign_jobs($1::jsonb)", plan.dump()), 0);
  EXPECT_EQ(sql.State(c), "pending");
  EXPECT_EQ(AssignWith(sql, b, "h1", R"({"http": 20001})"), 1);
}

TEST(Ports, AnUnprivilegedJobNamesOnlyPortsOfTheHostsRangeAndNoneBelow1024) {
  TestDatabase db;
  Sql admin(db);
  BridgeHost(admin, "h1", 10);
  Sql alice(db.DsnAs(db.CreateLogin("alice", {"pgfleet_submitter"})));
  std::string low = alice.ErrorOf(
      "insert into pgfleet.jobs (command, network, ports) values ('{true}', 'bridge',"
      " '{\"web\": 80}')");
  EXPECT_NE(low.find("ports.web asks for host port 80: ports below 1024 are for members of "
                     "pgfleet_privileged only"),
            std::string::npos)
      << low;
  long long outside = alice.Num(
      "insert into pgfleet.jobs (command, network, ports) values ('{true}', 'bridge',"
      " '{\"db\": 5432}') returning id");
  EXPECT_EQ(AssignWith(admin, outside, "h1", R"({"db": 5432})"), 0);
  // A privileged job may name it.
  long long privileged = PortJob(admin, R"({"db": 5432})", "host");
  EXPECT_EQ(AssignWith(admin, privileged, "h1", R"({"db": 5432})"), 1);
}

TEST(Ports, ABridgeJobIsNotAssignedToAHostWithoutTheBridge) {
  TestDatabase db;
  Sql sql(db);
  sql.RegisterHost("plain", 1000, 1000);  // networks default: host, none
  long long j = PortJob(sql, R"({"http": 0})");
  EXPECT_EQ(AssignWith(sql, j, "plain", R"({"http": 20000})"), 0);
  EXPECT_EQ(sql.Str("select networks::text from pgfleet.hosts where id = 'plain'"), "{host,none}");
}

TEST(Ports, EveryEndOfAnAttemptFreesItsPorts) {
  TestDatabase db;
  Sql sql(db);
  long long gen = BridgeHost(sql, "h1", 10);
  auto assigned = [&](const std::string& ports) {
    long long j = PortJob(sql, ports);
    EXPECT_EQ(AssignWith(sql, j, "h1", ports), 1);
    return j;
  };
  // Exit.
  long long exited = assigned(R"({"http": 20000})");
  sql.ReportOne("h1", gen, {{"job", exited}, {"attempt", 1}, {"kind", "running"}, {"pid", 5}});
  sql.ReportOne("h1", gen,
                {{"job", exited}, {"attempt", 1}, {"kind", "exited"}, {"exit_code", 0}});
  EXPECT_EQ(Held(sql), "");
  // A failed dispatch.
  long long undelivered = assigned(R"({"http": 20001})");
  sql.Exec("select pgfleet.dispatch_failed('h1', $1::jsonb, 'refused')",
           json::array({{{"job", undelivered}, {"attempt", 1}}}).dump());
  EXPECT_EQ(sql.State(undelivered), "pending");
  EXPECT_EQ(Held(sql), "");
  // A start failure, then a cancelled job's stop.
  sql.Exec("update pgfleet.hosts set suspended_until = null");
  long long failed = assigned(R"({"http": 20002})");
  sql.ReportOne("h1", gen,
                {{"job", failed}, {"attempt", 1}, {"kind", "start_failed"}, {"error", "no"}});
  EXPECT_EQ(Held(sql), "");
  // Host loss: the host is silent past its TTL and swept.
  long long lost = assigned(R"({"http": 20004})");
  sql.Exec("update pgfleet.host_heartbeats set last_seen = now() - interval '1 hour'");
  sql.Num("select count(*) from pgfleet.sweep_lost_hosts(10, '-infinity')");
  EXPECT_NE(sql.State(lost), "assigned");
  EXPECT_EQ(Held(sql), "");
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.allocation_drift"), 0);
  // A job deleted by hand (its host's cpu is then out of step, as ever;
  // its ports are not).
  sql.Exec("update pgfleet.hosts set state = 'up'");
  sql.Exec("update pgfleet.host_heartbeats set last_seen = now()");
  long long deleted = assigned(R"({"http": 20003})");
  sql.Exec("delete from pgfleet.jobs where id = $1", deleted);
  EXPECT_EQ(Held(sql), "");
}

TEST(Ports, SubmittersCannotSetWhatSchedulersAndHostsOwn) {
  TestDatabase db;
  Sql alice(db.DsnAs(db.CreateLogin("alice", {"pgfleet_submitter"})));
  for (const std::string column : {"host_ports", "address"}) {
    std::string value = column == "address" ? "'10.0.0.1'" : "'{\"http\": 20000}'";
    std::string error = alice.ErrorOf("insert into pgfleet.jobs (command, " + column +
                                      ") values ('{true}', " + value + ")");
    EXPECT_NE(error.find(column), std::string::npos) << column << ": " << error;
  }
  Sql admin(db);
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.jobs"), 0);
  // Nor write the ports held, nor read other tenants' through the table.
  EXPECT_NE(alice.ErrorOf("insert into pgfleet.job_ports values ('h1', 20000, 1, 1, 'x')"), "");
  EXPECT_NE(alice.ErrorOf("select * from pgfleet.job_ports"), "");
}

TEST(Ports, HostRangesAndNetworksAreChecked) {
  TestDatabase db;
  Sql sql(db);
  for (const std::string range : {"int4range(80, 100)", "int4range(20000, 20000)",
                                   "int4range(60000, 70000)", "int4range(20000, null)"}) {
    std::string error = sql.ErrorOf(
        "select pgfleet.register_host('h1', 'http://127.0.0.1:1', 1000, 1000, '{}', 'container',"
        " null, " + range + ", null, null)");
    EXPECT_NE(error.find("port_range must be within 1024-65535 and not empty"),
              std::string::npos)
        << range << ": " << error;
  }
  std::string error = sql.ErrorOf(
      "select pgfleet.register_host('h1', 'http://127.0.0.1:1', 1000, 1000, '{}', 'container',"
      " null, null, '{host,overlay}', null)");
  EXPECT_NE(error.find("networks must be among host, none and bridge"), std::string::npos) << error;
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.hosts"), 0);
}

TEST(Ports, ABadAddressInARunningReportIsIgnoredNotFatal) {
  TestDatabase db;
  Sql sql(db);
  long long gen = BridgeHost(sql, "h1", 10);
  long long good = PortJob(sql, R"({"http": 0})");
  long long bad = PortJob(sql, R"({"http": 0})");
  ASSERT_EQ(AssignWith(sql, good, "h1", R"({"http": 20000})"), 1);
  ASSERT_EQ(AssignWith(sql, bad, "h1", R"({"http": 20001})"), 1);
  auto reports = sql.ReportJobs(
      "h1", gen,
      json::array({{{"job", good}, {"attempt", 1}, {"kind", "running"}, {"address", "10.89.0.7"}},
                   {{"job", bad}, {"attempt", 1}, {"kind", "running"},
                    {"address", "999.1.1.1'; drop table x"}}}));
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_TRUE(reports[0].accepted && reports[1].accepted);
  EXPECT_EQ(sql.Str("select host(address) from pgfleet.jobs where id = $1", good), "10.89.0.7");
  EXPECT_EQ(sql.Str("select address from pgfleet.jobs where id = $1", bad), "");
  EXPECT_EQ(sql.Str("select pgfleet.reported_address('300.1.1.1')"), "");
  EXPECT_EQ(sql.Str("select pgfleet.reported_address('fe80::1')"), "fe80::1");
}

TEST(Endpoints, ShowOnlyWhatTheCallerMaySeeWithTheHostsAddress) {
  TestDatabase db;
  Sql admin(db);
  long long gen = BridgeHost(admin, "h1", 10);
  Sql alice(db.DsnAs(db.CreateLogin("alice", {"pgfleet_submitter"})));
  Sql bob(db.DsnAs(db.CreateLogin("bob", {"pgfleet_submitter"})));
  long long mine = alice.Num(
      "insert into pgfleet.jobs (command, formation, network, ports) values ('{true}', 'web',"
      " 'bridge', '{\"http\": 0}') returning id");
  ASSERT_EQ(AssignWith(admin, mine, "h1", R"({"http": 20003})"), 1);
  admin.ReportOne("h1", gen,
                  {{"job", mine}, {"attempt", 1}, {"kind", "running"}, {"address", "10.89.0.9"}});
  EXPECT_EQ(alice.Str("select formation || ' ' || host || ' ' || address || ':' || port || ' ' ||"
                      " port_name || ' ' || host(job_address) || ' ' || health"
                      " from pgfleet.endpoints"),
            "web h1 127.0.0.5:20003 http 10.89.0.9 none");
  EXPECT_EQ(bob.Num("select count(*) from pgfleet.endpoints"), 0);
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.endpoints"), 1);
}

TEST(Endpoints, AWatcherHearsOneNotificationPerFormationPerTransaction) {
  TestDatabase db;
  Sql sql(db);
  long long gen = BridgeHost(sql, "h1", 10);
  long long a = PortJob(sql, R"({"http": 0})", "bridge", "web");
  long long b = PortJob(sql, R"({"http": 0})", "bridge", "web");
  long long other = PortJob(sql, R"({"http": 0})", "bridge", "api");
  ASSERT_EQ(AssignWith(sql, a, "h1", R"({"http": 20000})"), 1);
  ASSERT_EQ(AssignWith(sql, b, "h1", R"({"http": 20001})"), 1);
  ASSERT_EQ(AssignWith(sql, other, "h1", R"({"http": 20002})"), 1);

  auto listener = db.Connect();
  Collector heard(*listener, model::kEndpointsChannel);
  // Nobody watches yet: no notification, whatever changes.
  sql.ReportOne("h1", gen, {{"job", other}, {"attempt", 1}, {"kind", "running"}});
  CollectFor(*listener, std::chrono::milliseconds(300));
  EXPECT_TRUE(heard.payloads.empty());

  {
    pqxx::work tx(*listener);
    tx.exec("select pgfleet.watch_endpoints('web')");
    tx.commit();
  }
  // Two of web's jobs start in one batch (one transaction): one notification.
  sql.ReportJobs("h1", gen,
                 json::array({{{"job", a}, {"attempt", 1}, {"kind", "running"}},
                              {{"job", b}, {"attempt", 1}, {"kind", "running"}}}));
  CollectFor(*listener, std::chrono::milliseconds(500));
  EXPECT_EQ(heard.payloads, std::vector<std::string>{"web"});
  // api is not watched by this session.
  heard.payloads.clear();
  sql.ReportOne("h1", gen, {{"job", other}, {"attempt", 1}, {"kind", "exited"}, {"exit_code", 0}});
  CollectFor(*listener, std::chrono::milliseconds(300));
  EXPECT_TRUE(heard.payloads.empty());
  // One of web's goes: heard.
  sql.ReportOne("h1", gen, {{"job", a}, {"attempt", 1}, {"kind", "exited"}, {"exit_code", 0}});
  CollectFor(*listener, std::chrono::milliseconds(500));
  EXPECT_EQ(heard.payloads, std::vector<std::string>{"web"});
  {
    pqxx::work tx(*listener);
    tx.exec("select pgfleet.unwatch_endpoints()");
    tx.commit();
  }
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.endpoint_watchers"), 0);
}

// Two schedulers give ports on one host at once: the second never meets the
// primary key (a failed pass), it skips the host while the first holds it
// and sees its ports once it committed.
TEST(Ports, ConcurrentPlansForOnePortNeverFailThePass) {
  TestDatabase db;
  Sql sql(db);
  BridgeHost(sql, "h1", 10);
  long long a = PortJob(sql, R"({"http": 0})");
  long long b = PortJob(sql, R"({"http": 0})");
  auto other = db.Connect();
  pqxx::work first(*other);
  json plan_a = json::array({{{"job", a}, {"host", "h1"}, {"ports", {{"http", 20000}}}}});
  ASSERT_EQ(first.exec_params("select * from pgfleet.assign_jobs($1::jsonb)", plan_a.dump()).size(),
            1u);
  // h1 is held: nothing assigned, no error.
  EXPECT_EQ(AssignWith(sql, b, "h1", R"({"http": 20000})"), 0);
  first.commit();
  // Now the port is seen held: refused, no error.
  EXPECT_EQ(AssignWith(sql, b, "h1", R"({"http": 20000})"), 0);
  EXPECT_EQ(AssignWith(sql, b, "h1", R"({"http": 20001})"), 1);
}

}  // namespace
}  // namespace pgfleet::integration
