// Ports end to end (issue 37), real daemons: a host's port range is a
// resource that jobs wait for, with a reason naming the port, and no port
// is ever given twice; `pgfleet endpoints --watch` follows a replica that
// appears, becomes healthy and goes, one notification per change.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "core/model/constants.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

// Ports held twice on one host right now: by job_ports (the key forbids it)
// and by what live attempts were given (jobs.host_ports).
const char* kDoubled = R"(
  select count(*) from (
    select j.host_id, p.value::text from pgfleet.jobs j, jsonb_each(j.host_ports) p
     where j.state in ('assigned', 'running')
     group by 1, 2 having count(*) > 1) d)";

TEST(PortsTest, FiftyJobsOnFortyPortsWaitNamingThePortAndNoneIsGivenTwice) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 8000, 8000, {"--port-range", "20000-20039"});
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  ASSERT_EQ("20000-20039",
            db.Scalar("select port_range from pgfleet.host_status where id = 'h1'"));

  std::atomic<bool> sampling{true};
  std::atomic<long long> doubled{0}, samples{0};
  std::thread sampler([&] {
    auto conn = db.Connect();
    while (sampling) {
      pqxx::nontransaction tx(*conn);
      doubled += tx.exec1(kDoubled)[0].as<long long>();
      ++samples;
      std::this_thread::sleep_for(50ms);
    }
  });
  // 50 jobs of a few seconds each, each asking for any port; they listen on it.
  db.Scalar(
      "insert into pgfleet.jobs (command, cpu, memory, ports)"
      " select array['sh', '-c', 'test -n \"$PGFLEET_PORT_HTTP\" && sleep 4'], 10, 8,"
      " '{\"http\": 0}' from generate_series(1, 50); select 1");
  const char* kLive = "select count(*) from pgfleet.jobs where state in ('assigned', 'running')";
  ASSERT_TRUE(WaitFor([&] { return db.Count(kLive) == 40; }, 30s))
      << db.Count(kLive) << cluster.Logs();
  const char* kWaitingForPorts =
      "select count(*) from pgfleet.jobs where state = 'pending'"
      " and error like 'waiting for ports: ports.http: every port of h1''s range 20000-20039 is held'";
  EXPECT_TRUE(WaitFor([&] { return db.Count(kWaitingForPorts) >= 1; }, 10s))
      << db.Scalar("select string_agg(distinct coalesce(error, '-'), ' | ') from pgfleet.jobs"
                   " where state = 'pending'");
  EXPECT_LE(db.Count(kLive), 40);
  ASSERT_TRUE(WaitFor([&] { return db.Count("select count(*) from pgfleet.jobs where state = "
                                            "'succeeded'") == 50; },
                      90s))
      << db.Scalar("select string_agg(state || ' ' || coalesce(error, ''), ' | ') from pgfleet.jobs"
                   " where state <> 'succeeded'")
      << cluster.Logs();
  sampling = false;
  sampler.join();
  EXPECT_GT(samples.load(), 20);
  EXPECT_EQ(0, doubled.load());
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.job_ports"));
  // Every job saw its port, and all were of the range.
  EXPECT_EQ(50, db.Count("select count(*) from pgfleet.jobs where (host_ports->>'http')::int"
                         " between 20000 and 20039"));
}

TEST(PortsTest, EndpointsWatchFollowsAReplicaThatComesBecomesHealthyAndGoes) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 4000, 4000, {"--port-range", "20000-20999"});
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();

  // Someone listening the way a client would: LISTEN, then watch.
  auto listener = db.Connect();
  struct Count : pqxx::notification_receiver {
    using pqxx::notification_receiver::notification_receiver;
    void operator()(const std::string& payload, int) override {
      if (payload == "web") ++heard;
    }
    int heard = 0;
  } notes(*listener, model::kEndpointsChannel);
  {
    pqxx::work tx(*listener);
    tx.exec("select pgfleet.watch_endpoints('web')");
    tx.commit();
  }
  const std::string log = cluster.dir() + "/endpoints-watch.log";
  Process watch({BinaryPath("pgfleet"), "endpoints", "web", "--watch"}, log,
                {"PGFLEET_DB=" + db.dsn()});
  ASSERT_TRUE(WaitFor([&] { return watch.Log().find("FORMATION") != std::string::npos; }, 10s))
      << watch.Log();

  auto r = cluster.Cli({"formation", "create", "web", "--kind", "service", "--replicas", "1",
                        "--port", "http=20500", "--health-tcp", "20500", "--health-interval",
                        "1", "--stop-grace", "1", "--", "python3", "-m", "http.server", "20500",
                        "--bind", "127.0.0.1"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  const std::string job = [&] {
    std::string id;
    WaitFor([&] {
      id = db.Scalar("select coalesce(max(id)::text, '') from pgfleet.jobs where formation = 'web'");
      return !id.empty();
    }, 10s);
    return id;
  }();
  ASSERT_FALSE(job.empty());
  const std::string row = "web " + job + " http 127.0.0.1:20500";
  EXPECT_TRUE(WaitFor([&] { return watch.Log().find("+ " + row) != std::string::npos; }, 30s))
      << watch.Log() << cluster.Logs();
  EXPECT_TRUE(WaitFor([&] {
    return watch.Log().find("~ " + row) != std::string::npos &&
           watch.Log().find("healthy") != std::string::npos;
  }, 30s)) << watch.Log() << cluster.Logs();
  auto listed = cluster.Cli({"endpoints", "web", "--json"});
  EXPECT_NE(std::string::npos, listed.out.find("\"port\": 20500")) << listed.out;
  EXPECT_NE(std::string::npos, listed.out.find("\"health\": \"healthy\"")) << listed.out;

  r = cluster.Cli({"formation", "scale", "web", "0"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  EXPECT_TRUE(WaitFor([&] { return watch.Log().find("- " + row) != std::string::npos; }, 30s))
      << watch.Log() << cluster.Logs();

  // Came (running), became healthy, went: three changes, one notification each.
  auto deadline = std::chrono::steady_clock::now() + Slowed(2s);
  while (std::chrono::steady_clock::now() < deadline) listener->await_notification(0, 200000);
  EXPECT_EQ(3, notes.heard) << db.Scalar(
      "select string_agg(kind || ' ' || coalesce(detail, ''), ' | ' order by id)"
      " from pgfleet.job_events");
}

}  // namespace
}  // namespace pgfleet::testing
