// The CLI's statements (cli/queries) against the real server: every field of
// a submitted spec reaches its column by name, the listings filter and read
// their rows by column name, and a formation without a command stores null.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/queries.h"
#include "tests/support/test_support.h"

namespace pgfleet {
namespace {

using nlohmann::json;
using testing::TestDatabase;

// A connection with the CLI's statements, as Command::Connect makes it.
std::unique_ptr<pqxx::connection> CliConnection(const TestDatabase& db) {
  auto conn = db.Connect();
  cli::PrepareQueries(*conn);
  return conn;
}

int64_t SubmitCommitted(pqxx::connection& conn, const model::JobSpec& spec,
                        const std::string& key = "") {
  pqxx::work tx(conn);
  int64_t id = cli::Submit(tx, spec, key);
  tx.commit();
  return id;
}

TEST(CliQueriesTest, SubmitStoresEveryFieldInItsOwnColumn) {
  TestDatabase db;
  auto conn = CliConnection(db);
  {
    pqxx::work tx(*conn);
    cli::NewFormation f;
    f.name = "nightly";
    cli::CreateFormation(tx, f);
    tx.commit();
  }
  model::JobSpec s;
  s.command = {"sh", "-c", "echo \"a b\" \\ {x,y}"};
  s.env = {{"A", "1"}, {"B", "two"}};
  s.cpu = 250;
  s.memory = 128;
  s.constraints = {{"zone", "b"}};
  s.priority = 70;
  s.max_attempts = 3;
  s.formation = "nightly";
  s.rootfs = "alpine";
  s.user = "worker";
  s.network = "none";
  s.pids_max = 77;
  s.cpu_hard_limit = true;
  s.stop_grace_seconds = 4;
  int64_t id = SubmitCommitted(*conn, s, "key-1");

  pqxx::work tx(*conn);
  auto doc = cli::InspectJob(tx, id);
  ASSERT_TRUE(doc.has_value());
  const json& j = *doc;
  EXPECT_EQ(json(s.command), j["command"]);
  EXPECT_EQ(json({{"A", "1"}, {"B", "two"}}), j["env"]);
  EXPECT_EQ(250, j["cpu"]);
  EXPECT_EQ(128, j["memory"]);
  EXPECT_EQ(json({{"zone", "b"}}), j["constraints"]);
  EXPECT_EQ(70, j["priority"]);
  EXPECT_EQ(3, j["max_attempts"]);
  EXPECT_EQ("nightly", j["formation"]);
  EXPECT_EQ("key-1", j["idempotency_key"]);
  EXPECT_EQ("alpine", j["rootfs"]);
  EXPECT_EQ("worker", j["run_as"]);
  EXPECT_EQ("none", j["network"]);
  EXPECT_EQ(77, j["pids_max"]);
  EXPECT_EQ(true, j["cpu_hard_limit"]);
  EXPECT_EQ(4, j["stop_grace_seconds"]);
  ASSERT_TRUE(j["events"].is_array());
}

TEST(CliQueriesTest, EmptyOptionalFieldsAreStoredAsNull) {
  TestDatabase db;
  auto conn = CliConnection(db);
  model::JobSpec s;
  s.command = {"true"};
  int64_t id = SubmitCommitted(*conn, s);
  pqxx::work tx(*conn);
  json j = *cli::InspectJob(tx, id);
  EXPECT_TRUE(j["idempotency_key"].is_null());
  EXPECT_TRUE(j["rootfs"].is_null());
  EXPECT_TRUE(j["run_as"].is_null());
}

TEST(CliQueriesTest, SubmitWithAUsedIdempotencyKeyReturnsTheFirstJob) {
  TestDatabase db;
  auto conn = CliConnection(db);
  model::JobSpec s;
  s.command = {"true"};
  int64_t a = SubmitCommitted(*conn, s, "same");
  s.command = {"false"};
  int64_t b = SubmitCommitted(*conn, s, "same");
  EXPECT_EQ(a, b);
  EXPECT_EQ(1, db.Count("select count(*) from pgfleet.jobs"));
}

TEST(CliQueriesTest, ListJobsHidesFinalJobsUnlessAllAndFiltersByFormation) {
  TestDatabase db;
  auto conn = CliConnection(db);
  model::JobSpec s;
  s.command = {"sleep", "1"};
  int64_t live = SubmitCommitted(*conn, s);
  int64_t cancelled = SubmitCommitted(*conn, s);
  {
    pqxx::work tx(*conn);
    EXPECT_EQ("cancelled", cli::CancelJob(tx, cancelled));
    tx.commit();
  }
  pqxx::work tx(*conn);
  cli::JobFilter filter;
  auto jobs = cli::ListJobs(tx, filter);
  ASSERT_EQ(1u, jobs.size());
  EXPECT_EQ(live, jobs[0].id);
  EXPECT_EQ(model::JobState::kPending, jobs[0].state);
  EXPECT_EQ("sleep 1", jobs[0].command);
  EXPECT_EQ(100, jobs[0].cpu);
  EXPECT_EQ(live, json::parse(jobs[0].json)["id"]);

  filter.all = true;
  jobs = cli::ListJobs(tx, filter);
  ASSERT_EQ(2u, jobs.size());
  EXPECT_EQ(cancelled, jobs[0].id);  // newest first
  EXPECT_EQ(model::JobState::kCancelled, jobs[0].state);

  filter.formation = "no-such-formation";
  EXPECT_TRUE(cli::ListJobs(tx, filter).empty());

  auto progress = cli::GetJobProgress(tx, cancelled);
  ASSERT_TRUE(progress.has_value());
  EXPECT_EQ(model::JobState::kCancelled, progress->state);
  EXPECT_EQ(0, progress->attempt);
  EXPECT_FALSE(progress->exit_code.has_value());
  EXPECT_FALSE(cli::GetJobProgress(tx, cancelled + 100).has_value());
}

TEST(CliQueriesTest, ListEventsPagesOldestFirstAfterAnId) {
  TestDatabase db;
  auto conn = CliConnection(db);
  model::JobSpec s;
  s.command = {"true"};
  int64_t a = SubmitCommitted(*conn, s);
  int64_t b = SubmitCommitted(*conn, s);
  pqxx::work tx(*conn);
  auto all = cli::ListEvents(tx, 0, 0, 100);
  ASSERT_GE(all.size(), 2u);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].id, all[i].id);
  auto of_b = cli::ListEvents(tx, b, 0, 100);
  ASSERT_FALSE(of_b.empty());
  for (const auto& e : of_b) EXPECT_EQ(b, e.job_id);
  auto newest = cli::ListEvents(tx, 0, 0, 1);
  ASSERT_EQ(1u, newest.size());
  EXPECT_EQ(all.back().id, newest[0].id);
  EXPECT_TRUE(cli::ListEvents(tx, 0, all.back().id, 100).empty());
  for (const auto& e : cli::ListEvents(tx, a, 0, 100)) EXPECT_EQ(a, e.job_id);
}

TEST(CliQueriesTest, FormationWithoutCommandStoresNullAndScales) {
  TestDatabase db;
  auto conn = CliConnection(db);
  pqxx::work tx(*conn);
  cli::NewFormation batch;
  batch.name = "reports";
  cli::CreateFormation(tx, batch);
  cli::NewFormation web;
  web.name = "web";
  web.kind = "service";
  web.replicas = 2;
  web.job.command = {"sleep", "300"};
  web.job.cpu = 300;
  int web_id = cli::CreateFormation(tx, web);
  cli::ScaleFormation(tx, "web", 5);
  tx.commit();
  EXPECT_EQ("", db.Scalar("select command from pgfleet.formations where name = 'reports'"));
  EXPECT_EQ("{sleep,300}", db.Scalar("select command from pgfleet.formations where id = " +
                                     std::to_string(web_id)));
  EXPECT_EQ("5", db.Scalar("select replicas from pgfleet.formations where name = 'web'"));
  EXPECT_EQ("300", db.Scalar("select cpu from pgfleet.formations where name = 'web'"));

  pqxx::work read(*conn);
  json statuses = cli::FormationStatuses(read);
  ASSERT_EQ(3u, statuses.size());  // default, reports, web: by name
  EXPECT_EQ("default", statuses[0]["name"]);
  EXPECT_EQ(5, statuses[2]["desired"]);
  EXPECT_EQ(0, cli::ClusterSummary(read)["hosts_total"]);
}

TEST(CliQueriesTest, FormationTemplateCarriesEveryRunFieldToItsReplicas) {
  TestDatabase db;
  auto conn = CliConnection(db);
  cli::NewFormation web;
  web.name = "web";
  web.kind = "service";
  web.job.command = {"./server"};
  web.job.rootfs = "busybox";
  web.job.user = "daemon";
  web.job.network = "none";
  web.job.pids_max = 33;
  web.job.cpu_hard_limit = true;
  web.job.stop_grace_seconds = 2;
  int id;
  {
    pqxx::work tx(*conn);
    id = cli::CreateFormation(tx, web);
    tx.commit();
  }
  EXPECT_EQ("busybox daemon none 33 t 2",
            db.Scalar("select concat_ws(' ', rootfs, run_as, network, pids_max, cpu_hard_limit, "
                      "stop_grace_seconds) from pgfleet.formations where name = 'web'"));
  EXPECT_EQ("1", db.Scalar("select pgfleet.create_replicas(" + std::to_string(id) + ", 1)"));
  EXPECT_EQ("busybox daemon none 33 t 2",
            db.Scalar("select concat_ws(' ', rootfs, run_as, network, pids_max, cpu_hard_limit, "
                      "stop_grace_seconds) from pgfleet.jobs where formation = 'web'"));
}

// A sysbatch formation deleted and created again is a new one: not done,
// and the hosts its first life ran on get a job again.
TEST(CliQueriesTest, ASysbatchFormationCreatedAgainRunsAgainOnEveryHost) {
  TestDatabase db;
  db.Scalar(
      "select pgfleet.register_host('h1', 'http://127.0.0.1:1', 1000, 1000, '{}', 'process', "
      "null)");
  auto conn = CliConnection(db);
  cli::NewFormation f;
  f.name = "upgrade";
  f.kind = "sysbatch";
  f.job.command = {"true"};
  f.job.max_attempts = 2;
  int id;
  {
    pqxx::work tx(*conn);
    id = cli::CreateFormation(tx, f);
    tx.commit();
  }
  const std::string ids = "array['h1']";
  EXPECT_EQ("1", db.Scalar("select pgfleet.insert_replicas(" + std::to_string(id) +
                           ", 'sysbatch', " + ids + ")"));
  EXPECT_EQ("2", db.Scalar("select max_attempts from pgfleet.jobs where formation = 'upgrade'"));
  {
    pqxx::work tx(*conn);
    EXPECT_FALSE(cli::FormationDone(tx, "upgrade").empty());
    EXPECT_NE(std::string::npos, cli::DeleteFormation(tx, "upgrade").find("history kept"));
    tx.commit();
  }
  EXPECT_EQ("1", db.Scalar("select count(*) from pgfleet.jobs where formation = 'upgrade'"
                           " and state = 'cancelled'"));
  {
    pqxx::work tx(*conn);
    EXPECT_EQ(id, cli::CreateFormation(tx, f));
    tx.commit();
  }
  EXPECT_EQ("", db.Scalar("select done_at from pgfleet.formations where name = 'upgrade'"));
  EXPECT_EQ("1", db.Scalar("select desired from pgfleet.formation_status where name = 'upgrade'"))
      << "h1 again";
  {
    pqxx::work tx(*conn);
    cli::FormationDone(tx, "upgrade");
    tx.commit();
  }
  EXPECT_EQ("0", db.Scalar("select desired from pgfleet.formation_status where name = 'upgrade'"))
      << "done in its second life before running: its first life's job does not count";
}

TEST(CliQueriesTest, HostsShowLateHeartbeatsAndDrainSetsTheState) {
  TestDatabase db;
  auto conn = CliConnection(db);
  db.Scalar(
      "select pgfleet.register_host('h1', 'http://127.0.0.1:1', 1000, 512, '{}', 'process', null)");
  pqxx::work tx(*conn);
  cli::DrainHost(tx, "h1", 30.0);
  tx.commit();
  pqxx::work read(*conn);
  auto hosts = cli::ListHosts(read);
  ASSERT_EQ(1u, hosts.size());
  EXPECT_EQ("h1", hosts[0].id);
  EXPECT_EQ("draining", hosts[0].shown_state);
  EXPECT_EQ("1000/1000m", hosts[0].cpu);
  EXPECT_EQ("512/512Mi", hosts[0].memory);
  EXPECT_EQ("http://127.0.0.1:1", hosts[0].api_url);
  read.commit();

  db.Scalar("update pgfleet.host_heartbeats set last_seen = now() - interval '1 hour'");
  pqxx::work up(*conn);
  cli::SetHostState(up, "h1", "up");
  up.commit();
  pqxx::work again(*conn);
  EXPECT_EQ("up (heartbeat late)", cli::ListHosts(again)[0].shown_state);
}

}  // namespace
}  // namespace pgfleet
