// Health checks end to end (hostd/health/, migrations/0031_health_checks.sql):
// a service replica whose command check starts failing flips to unhealthy
// and is restarted with an event quoting the check; a healthy fleet checked
// every second writes no job rows; hollow hosts' sim checks.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

const char* kHealth = "select health from pgfleet.jobs where formation = 'web' order by id limit 1";

TEST(HealthCheckTest, ReplicaWhoseCheckStartsFailingIsRestartedQuotingIt) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  // The check runs as the job's process would (process driver): in its
  // working directory, as its user; hostd opens nothing of the job's.
  const std::string ready = cluster.dir() + "/ready";
  std::ofstream(ready) << "yes\n";
  auto r = cluster.Cli({"formation", "create", "web", "--kind", "service", "--replicas", "1",
                        "--health-cmd", "test -f " + ready, "--health-interval", "1",
                        "--health-threshold", "2", "--stop-grace", "1", "--", "sleep", "300"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  ASSERT_TRUE(WaitFor([&] { return db.Scalar(kHealth) == "healthy"; }, 30s))
      << db.Scalar(kHealth) << cluster.Logs();
  EXPECT_EQ("1", db.Scalar("select healthy from pgfleet.formation_status where name = 'web'"));
  auto ps = cluster.Cli({"ps", "--formation", "web"});
  EXPECT_NE(std::string::npos, ps.out.find("HEALTH")) << ps.out;
  EXPECT_NE(std::string::npos, ps.out.find("healthy")) << ps.out;

  unlink(ready.c_str());
  const std::string events =
      "select count(*) from pgfleet.job_events e join pgfleet.jobs j on j.id = e.job_id"
      " where j.formation = 'web'";
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Count(events +
                        " and e.kind = 'requeued' and e.attempt = 1 and e.detail like "
                        "'health check failed 2 times: exit code 1%'") == 1;
      },
      30s))
      << db.Scalar(
             "select string_agg(kind || ': ' || coalesce(detail, ''), E'\\n' order by e.id)"
             " from pgfleet.job_events e")
      << cluster.Logs();
  EXPECT_EQ(1, db.Count(events + " and e.kind = 'health' and e.attempt = 1"
                                 " and e.detail = 'unhealthy: exit code 1'"));
  EXPECT_EQ(1, db.Count(events + " and e.kind = 'health' and e.attempt = 1"
                                 " and e.detail like 'healthy%'"));
  // The next attempt starts unknown, and comes back healthy once the file does.
  std::ofstream(ready) << "yes again\n";
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Scalar(
                   "select attempt > 1 and state = 'running' and health = 'healthy'"
                   " from pgfleet.jobs where formation = 'web'") == "t";
      },
      60s))
      << db.Scalar("select state || ' ' || health || ' ' || attempt from pgfleet.jobs")
      << cluster.Logs();
  auto inspect = cluster.Cli(
      {"inspect", db.Scalar("select id::text from pgfleet.jobs where formation = 'web'")});
  EXPECT_NE(std::string::npos, inspect.out.find("health: healthy")) << inspect.out;
}

TEST(HealthCheckTest, ARestartedHostdChecksTheReplicasItReattachesTo) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  Process& first = cluster.StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  const std::string ready = cluster.dir() + "/ready";
  std::ofstream(ready) << "yes\n";
  ASSERT_EQ(0, cluster
                   .Cli({"formation", "create", "web", "--kind", "service", "--replicas", "1",
                         "--health-cmd", "test -f " + ready, "--health-interval", "1",
                         "--health-threshold", "2", "--stop-grace", "1", "--", "sleep", "300"})
                   .exit_code);
  ASSERT_TRUE(WaitFor([&] { return db.Scalar(kHealth) == "healthy"; }, 30s)) << cluster.Logs();
  first.Kill9();  // the replica runs on under its shim
  cluster.StartHost("h1", 4000, 4000);
  ASSERT_TRUE(WaitFor(
      [&] { return cluster.Logs().find("re-attached to running job") != std::string::npos; }, 30s))
      << cluster.Logs();
  unlink(ready.c_str());
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.job_events where kind = 'requeued'"
                   " and attempt = 1 and detail like 'health check failed 2 times%'") == 1;
      },
      30s))
      << cluster.Logs();
}

TEST(HealthCheckTest, HealthyFleetOf20CheckedEverySecondWritesNoJobRowsFor5Seconds) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  auto r = cluster.Cli({"formation", "create", "web", "--kind", "service", "--replicas", "20",
                        "--cpu", "50", "--memory", "16", "--health-cmd", "true",
                        "--health-interval", "1", "--", "sleep", "300"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Scalar("select healthy from pgfleet.formation_status where name = 'web'") == "20";
      },
      60s))
      << db.Scalar("select to_jsonb(f)::text from pgfleet.formation_status f") << cluster.Logs();
  // Every row's version and every event, before and after a window of five
  // checks each: a write of any job row would change its xmin.
  const std::string versions =
      "select string_agg(id || ':' || xmin::text, ',' order by id) from pgfleet.jobs";
  const std::string before = db.Scalar(versions);
  const long long events = db.Count("select count(*) from pgfleet.job_events");
  std::this_thread::sleep_for(5s);
  EXPECT_EQ(before, db.Scalar(versions));
  EXPECT_EQ(events, db.Count("select count(*) from pgfleet.job_events"));
  EXPECT_EQ("20", db.Scalar("select healthy from pgfleet.formation_status where name = 'web'"));
}

TEST(HealthCheckTest, HttpAndTcpChecksOfAProcessJobGoToTheHostsLoopback) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  // A process job shares the host's network: hostd's own API (GET /health)
  // stands in for the job's server; nothing listens on port 1.
  const std::string url = db.Scalar("select api_url from pgfleet.hosts where id = 'h1'");
  const std::string port = url.substr(url.rfind(':') + 1);
  ASSERT_EQ(0, cluster
                   .Cli({"formation", "create", "web", "--kind", "service", "--replicas", "1",
                         "--health-http", port + "/health", "--health-interval", "1", "--", "sleep",
                         "300"})
                   .exit_code);
  ASSERT_TRUE(WaitFor([&] { return db.Scalar(kHealth) == "healthy"; }, 30s)) << cluster.Logs();
  EXPECT_NE(std::string::npos,
            db.Scalar("select health_output from pgfleet.jobs where formation = 'web'")
                .find("GET /health: HTTP/1."))
      << db.Scalar("select health_output from pgfleet.jobs where formation = 'web'");
  ASSERT_EQ(0, cluster
                   .Cli({"formation", "create", "tcp", "--kind", "service", "--replicas", "1",
                         "--health-tcp", "1", "--health-interval", "1", "--health-threshold", "1",
                         "--stop-grace", "1", "--", "sleep", "300"})
                   .exit_code);
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.job_events e join pgfleet.jobs j on"
                   " j.id = e.job_id where j.formation = 'tcp' and e.kind = 'requeued'"
                   " and e.detail like 'health check failed 1 time: connect 127.0.0.1:1: "
                   "Connection refused%'") >= 1;
      },
      30s))
      << db.Scalar(
             "select string_agg(kind || ': ' || coalesce(detail, ''), E'\\n' order by id)"
             " from pgfleet.job_events")
      << cluster.Logs();
}

TEST(HealthCheckTest, HollowHostsSimChecksPassAndCommandFalseFails) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHollowHosts("sim-", 2);
  ASSERT_TRUE(cluster.WaitHostsUp(2)) << cluster.Logs();
  ASSERT_EQ(0, cluster
                   .Cli({"formation", "create", "web", "--kind", "service", "--replicas", "4",
                         "--env", "PGFLEET_SIM_SECONDS=1000", "--health-tcp", "6379",
                         "--health-interval", "1", "--", "sleep", "1000"})
                   .exit_code);
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Scalar("select healthy from pgfleet.formation_status where name = 'web'") == "4";
      },
      30s))
      << cluster.Logs();
  ASSERT_EQ(0,
            cluster
                .Cli({"formation", "create", "bad", "--kind", "service", "--replicas", "1", "--env",
                      "PGFLEET_SIM_SECONDS=1000", "--health-cmd", "false", "--health-interval", "1",
                      "--health-threshold", "1", "--", "sleep", "1000"})
                .exit_code);
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.job_events e join pgfleet.jobs j on"
                   " j.id = e.job_id where j.formation = 'bad' and e.kind = 'requeued'"
                   " and e.detail like 'health check failed 1 time: sim: false fails%'") >= 1;
      },
      30s))
      << cluster.Logs();
}

}  // namespace
}  // namespace pgfleet::testing
