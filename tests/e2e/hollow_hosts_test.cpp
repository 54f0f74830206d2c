// Hollow hosts (hostd/hollow/hollow.h) against a real PostgreSQL: many simulated
// hosts in one process register, heartbeat, serve their API under
// /hosts/<id> of one listener, run sim jobs dispatched to them, and start by
// reconcile an assigned job nobody dispatched. No scheduler runs here: the
// tests assign jobs with pgfleet.assign_jobs and dispatch them themselves, as
// a scheduler would.

#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "core/metrics/metrics.h"
#include "core/net/endpoint.h"
#include "hostd/hollow/hollow.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr const char* kToken = "hollow-test-token";

class HollowHostsTest : public ::testing::Test {
 protected:
  // Starts `hosts` hollow hosts sim-1..sim-<hosts> and waits until all are up.
  void StartHosts(int hosts, std::chrono::milliseconds reconcile) {
    hostd::HollowOptions o;
    o.hosts = hosts;
    o.id_prefix = "sim-";
    o.dsn = db_.dsn();
    o.token = kToken;
    o.cpu = 2000;
    o.memory = 1024;
    o.labels = {{"zone", "hollow"}};
    o.heartbeat_interval = 500ms;
    o.reconcile_interval = reconcile;
    o.db_connections = 3;
    runner_ = std::thread([this, o] { result_ = hostd::RunHollowHosts(o, metrics_, stop_); });
    ASSERT_TRUE(WaitFor(
        [&] {
          return db_.Count(
                     "select count(*) from pgfleet.host_status where state = 'up' and "
                     "alive and driver = 'sim'") == hosts;
        },
        30s))
        << db_.Scalar("select count(*) from pgfleet.host_status");
  }
  void TearDown() override {
    stop_ = true;
    if (runner_.joinable()) runner_.join();
    EXPECT_EQ(result_, 0);
  }
  net::Endpoint EndpointOf(const std::string& host) {
    return net::MakeEndpoint(
        db_.Scalar("select api_url from pgfleet.hosts where id = '" + host + "'"), kToken);
  }
  // Submits a job with this env and assigns it to host; returns its id.
  int64_t Assign(const std::string& host, const json& env) {
    int64_t id = std::stoll(
        db_.Scalar("select pgfleet.submit(array['true'], env => '" + env.dump() + "'::jsonb)"));
    EXPECT_EQ(db_.Count("select count(*) from pgfleet.assign_jobs('[{\"job\":" +
                        std::to_string(id) + ",\"host\":\"" + host + "\"}]'::jsonb)"),
              1);
    return id;
  }
  // Posts the assigned job to its host's API, as a scheduler does; returns the start status.
  std::string Dispatch(const std::string& host, int64_t id) {
    std::string where = " from pgfleet.jobs j where j.id = " + std::to_string(id);
    json item{{"job", id},
              {"attempt", std::stoi(db_.Scalar("select attempt" + where))},
              {"spec", json::parse(db_.Scalar("select pgfleet.job_spec(j)::text" + where))},
              {"uid", db_.Scalar("select uid::text" + where)}};
    auto ep = EndpointOf(host);
    auto res =
        ep.client->Post(ep.prefix + "/v1/jobs",
                        SignDispatch(db_, host, json{{"jobs", {item}}}.dump()), "application/json");
    if (!res || res->status != 200) return "http error";
    return json::parse(res->body)["results"][0]["status"].get<std::string>();
  }
  std::string StateOf(int64_t id) {
    return db_.Scalar("select state from pgfleet.jobs where id = " + std::to_string(id));
  }
  bool WaitState(int64_t id, const std::string& state, std::chrono::milliseconds timeout = 20s) {
    return WaitFor([&] { return StateOf(id) == state; }, timeout);
  }

  TestDatabase db_;
  metrics::Registry metrics_;
  std::atomic<bool> stop_{false};
  int result_ = -1;
  std::thread runner_;
};

TEST_F(HollowHostsTest, FiftyHostsRegisterAndHeartbeatOverThreeConnections) {
  StartHosts(50, 60s);
  EXPECT_EQ(db_.Scalar("select api_url from pgfleet.hosts where id = 'sim-7'").rfind("http://", 0),
            0u);
  EXPECT_EQ(db_.Count("select count(*) from pgfleet.hosts where api_url like 'http://%/hosts/' "
                      "|| id and cpu = 2000 and memory = 1024 and labels ->> 'zone' = 'hollow' "
                      "and driver_note like 'hollow host%'"),
            50);
  // Every host heartbeats again after this moment (the database's clock).
  std::string t0 = db_.Scalar("select now()");
  EXPECT_TRUE(WaitFor(
      [&] {
        return db_.Count("select count(*) from pgfleet.host_heartbeats where last_seen > '" + t0 +
                         "'") == 50;
      },
      10s));
  // Three connections serve all fifty hosts.
  EXPECT_LE(db_.Count("select count(*) from pg_stat_activity where datname = current_database() "
                      "and pid <> pg_backend_pid()"),
            3);
}

TEST_F(HollowHostsTest, DispatchedSimJobsSucceedOrFailWithTheirExitCode) {
  StartHosts(20, 60s);
  int64_t ok = Assign("sim-3", json::object());
  int64_t bad = Assign("sim-17", {{"PGFLEET_SIM_EXIT_CODE", "7"}});
  EXPECT_EQ(Dispatch("sim-3", ok), "started");
  EXPECT_EQ(Dispatch("sim-17", bad), "started");
  EXPECT_TRUE(WaitState(ok, "succeeded"));
  EXPECT_TRUE(WaitState(bad, "failed"));
  EXPECT_EQ(db_.Scalar("select exit_code from pgfleet.jobs where id = " + std::to_string(bad)),
            "7");
  // A second dispatch of the same attempt starts nothing.
  EXPECT_EQ(Dispatch("sim-3", ok), "already");
  EXPECT_EQ(db_.AttemptsWithRepeated("running"), 0);
  // The host's API knows the job; its logs say why there are none.
  auto ep = EndpointOf("sim-3");
  auto got = ep.client->Get(ep.prefix + "/v1/jobs/" + std::to_string(ok));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(json::parse(got->body)["exit_code"], 0);
  auto logs = ep.client->Get(ep.prefix + "/v1/jobs/" + std::to_string(ok) + "/logs");
  ASSERT_TRUE(logs);
  EXPECT_EQ(logs->status, 404);
  EXPECT_NE(logs->body.find("simulated"), std::string::npos) << logs->body;
}

TEST_F(HollowHostsTest, SimSecondsDelaysTheExitAndStopEndsItWithSignal15) {
  StartHosts(5, 60s);
  int64_t slow = Assign("sim-2", {{"PGFLEET_SIM_SECONDS", "1.5"}});
  int64_t endless = Assign("sim-4", {{"PGFLEET_SIM_SECONDS", "600"}});
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Dispatch("sim-2", slow), "started");
  EXPECT_EQ(Dispatch("sim-4", endless), "started");
  EXPECT_TRUE(WaitState(slow, "running", 5s));
  EXPECT_TRUE(WaitState(slow, "succeeded"));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1500ms);
  EXPECT_GE(std::stod(db_.Scalar("select extract(epoch from finished_at - started_at) from "
                                 "pgfleet.jobs where id = " +
                                 std::to_string(slow))),
            1.4);
  ASSERT_EQ(StateOf(endless), "running");
  auto ep = EndpointOf("sim-4");
  auto res = ep.client->Post(
      ep.prefix + "/v1/jobs/" + std::to_string(endless) + "/stop",
      httplib::Headers{
          {"X-Pgfleet-Ticket",
           StopTicket(db_, "sim-4", endless,
                      std::stoi(db_.Scalar("select attempt from pgfleet.jobs where id = " +
                                           std::to_string(endless))))}},
      "", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_TRUE(WaitFor([&] { return StateOf(endless) != "running"; }, 5s));
  EXPECT_EQ(db_.Scalar("select signal from pgfleet.jobs where id = " + std::to_string(endless)),
            std::to_string(SIGTERM));
}

TEST_F(HollowHostsTest, ReconcileStartsAnAssignedJobNobodyDispatched) {
  StartHosts(10, 1s);
  int64_t id = Assign("sim-9", {{"PGFLEET_SIM_EXIT_CODE", "0"}});
  EXPECT_TRUE(WaitState(id, "succeeded"));
  EXPECT_EQ(db_.Scalar("select host_id from pgfleet.jobs where id = " + std::to_string(id)),
            "sim-9");
}

// pgfleet_host_reconciles_total of the hosts' shared registry.
double Reconciles(const metrics::Registry& registry) {
  const std::string text = registry.Render();
  const std::string name = "pgfleet_host_reconciles_total ";
  auto at = text.find("\n" + name);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + 1 + name.size()));
}

// A host reconciles when the heartbeat's answer shows the database's view of
// its live attempts differs from its own, not every --reconcile-interval: at
// rest, 10 hosts at a 1 s interval ask for their jobs about never instead of
// 40 times in 4 s; a job assigned and never dispatched is still started.
TEST_F(HollowHostsTest, AtRestHostsReconcileOnlyWhenTheDatabaseSeesThemOtherwise) {
  StartHosts(10, 1s);
  // Some hosts run jobs (their digests are of attempts, not of nothing).
  for (const char* host : {"sim-1", "sim-2", "sim-2"}) {
    int64_t id = Assign(host, {{"PGFLEET_SIM_SECONDS", "60"}});
    std::string status = Dispatch(host, id);  // "already": a reconcile was first
    ASSERT_TRUE(status == "started" || status == "already") << status;
    ASSERT_TRUE(WaitState(id, "running"));
  }
  std::this_thread::sleep_for(1s);  // past the reconciles those starts may have caused
  double before = Reconciles(metrics_);
  std::this_thread::sleep_for(4s);
  EXPECT_LE(Reconciles(metrics_) - before, 2) << metrics_.Render();
  int64_t id = Assign("sim-9", {{"PGFLEET_SIM_EXIT_CODE", "0"}});
  EXPECT_TRUE(WaitState(id, "succeeded"));
  EXPECT_GE(Reconciles(metrics_) - before, 1);
}

// With nothing to do, a host still reconciles every 12 intervals (the safety
// net): at 200 ms, each of 10 hosts one to three times in 5 s, not 25.
TEST_F(HollowHostsTest, AtRestHostsStillReconcileOnTheSafetyNet) {
  StartHosts(10, 200ms);
  std::this_thread::sleep_for(1s);
  double before = Reconciles(metrics_);
  std::this_thread::sleep_for(5s);
  double n = Reconciles(metrics_) - before;
  EXPECT_GE(n, 10) << metrics_.Render();
  EXPECT_LE(n, 40) << metrics_.Render();
}

TEST_F(HollowHostsTest, TheSharedListenerGuardsAndRoutesByHost) {
  StartHosts(3, 60s);
  auto ep = EndpointOf("sim-1");
  std::string url = db_.Scalar("select api_url from pgfleet.hosts where id = 'sim-1'");
  httplib::Client anonymous(url.substr(0, url.find("/hosts/")));
  auto no_token = anonymous.Get(ep.prefix + "/v1/jobs");
  ASSERT_TRUE(no_token);
  EXPECT_EQ(no_token->status, 401);
  auto health = anonymous.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto unknown = ep.client->Get("/hosts/sim-99/v1/jobs");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_NE(unknown->body.find("sim-99"), std::string::npos) << unknown->body;
  auto list = ep.client->Get(ep.prefix + "/v1/jobs");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->status, 200);
  EXPECT_EQ(json::parse(list->body)["jobs"].size(), 0u);
}

}  // namespace
}  // namespace pgfleet::testing
