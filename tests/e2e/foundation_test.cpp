// End to end with real processes: PostgreSQL (scripts/test), pgfleet-schedulerd,
// two pgfleet-hostd (process driver) and the pgfleet CLI.

#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "core/net/http.h"
#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class FoundationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(db_);
    cluster_->StartScheduler("s1");
    cluster_->StartHost("h1", 4000, 4000);
    cluster_->StartHost("h2", 4000, 8000, {"--label", "zone=b"});
    ASSERT_TRUE(cluster_->WaitHostsUp(2)) << cluster_->Logs();
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs();
  }
  std::string ApiUrl(const std::string& host) {
    return db_.Scalar("select api_url from pgfleet.hosts where id = '" + host + "'");
  }
  std::string Token() { return net::ReadTokenFile(cluster_->token_file()); }
  // `pgfleet run ARGS`; the job's id once it is in `state` (a failure is
  // recorded: callers check HasFailure()).
  std::string RunUntil(const std::vector<std::string>& args, const std::string& state) {
    std::vector<std::string> argv{"run"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = cluster_->Cli(argv);
    EXPECT_EQ(0, r.exit_code) << r.err;
    std::string id = util::Trim(r.out);
    EXPECT_TRUE(WaitFor(
        [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == state; },
        30s));
    return id;
  }
  // Waits until the scheduler said why job `id` waits; its state then.
  std::string StateOnceItWaitsWithAReason(const std::string& id) {
    WaitFor(
        [&] {
          return !db_.Scalar("select coalesce(error, '') from pgfleet.jobs where id = " + id)
                      .empty();
        },
        10s);
    return db_.Scalar("select state from pgfleet.jobs where id = " + id);
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(FoundationTest, TwoHundredJobsFromOneRawInsertAllSucceedExactlyOnce) {
  db_.Scalar(
      "with ins as (insert into pgfleet.jobs (command, formation)"
      " select array['sh', '-c', 'echo out-$1', 'sh', g::text], 'batch' || (g % 4)"
      "   from generate_series(1, 200) g returning 1) select count(*) from ins");
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == 200;
      },
      120s))
      << db_.Scalar(
             "select string_agg(state || ':' || n, ', ') from (select state, count(*) n from "
             "pgfleet.jobs group by state) x");
  // Exactly one running event per job, one attempt each.
  EXPECT_EQ(
      0,
      db_.Count("select count(*) from (select job_id from pgfleet.job_events where kind = 'running'"
                " group by job_id having count(*) <> 1) x"));
  EXPECT_EQ(
      200,
      db_.Count("select count(distinct job_id) from pgfleet.job_events where kind = 'running'"));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs where attempt <> 1"));
  // Outputs are in output_tail: job N printed out-<its generate_series value>.
  EXPECT_EQ(
      200,
      db_.Count(
          "select count(*) from pgfleet.jobs where output_tail = 'out-' || command[5] || E'\\n'"));
  // Nothing lost, resources all returned.
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.allocation_drift"));
  EXPECT_EQ(
      0, db_.Count("select coalesce(sum(cpu_allocated + memory_allocated), 0) from pgfleet.hosts"));
  EXPECT_EQ(2, db_.Count("select count(distinct host_id) from pgfleet.jobs"))
      << "both hosts should get work";
}

TEST_F(FoundationTest, RunWaitStreamsOutputAndExitsWithTheJobsExitCode) {
  auto r = cluster_->Cli({"run", "--wait", "--", "sh", "-c", "echo hello-from-job; exit 3"});
  EXPECT_EQ(3, r.exit_code) << r.out << r.err;
  EXPECT_NE(std::string::npos, r.out.find("hello-from-job")) << r.out;
  auto ok = cluster_->Cli({"run", "--wait", "--", "true"});
  EXPECT_EQ(0, ok.exit_code) << ok.out << ok.err;
}

TEST_F(FoundationTest, CliRunPrintsIdAndLogsReadsOutputFromTheHost) {
  auto r = cluster_->Cli({"run", "--", "sh", "-c", "echo line1; echo line2 >&2"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  std::string id = util::Trim(r.out);
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "succeeded"; },
      30s));
  auto logs = cluster_->Cli({"logs", id});
  EXPECT_EQ(0, logs.exit_code) << logs.err;
  EXPECT_EQ("line1\nline2\n", logs.out);
  auto tail = cluster_->Cli({"logs", id, "--tail", "1"});
  EXPECT_EQ("line2\n", tail.out);
  auto ps = cluster_->Cli({"ps", "--all", "--json"});
  ASSERT_EQ(0, ps.exit_code);
  auto j = nlohmann::json::parse(ps.out);
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(std::stoll(id), j[0]["id"].get<int64_t>());
  auto inspect = cluster_->Cli({"inspect", id});
  EXPECT_NE(std::string::npos, inspect.out.find("running")) << inspect.out;
}

TEST_F(FoundationTest, JobBiggerThanEveryHostStaysPendingWithAReason) {
  auto r = cluster_->Cli({"run", "--memory", "100000", "--", "true"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  std::string id = util::Trim(r.out);
  EXPECT_EQ("pending", StateOnceItWaitsWithAReason(id));
  EXPECT_EQ("no host has 100000 MiB memory; largest has 8000",
            db_.Scalar("select error from pgfleet.jobs where id = " + id));
  auto c = cluster_->Cli({"run", "--constraint", "zone=b", "--", "true"});
  std::string cid = util::Trim(c.out);
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + cid) == "succeeded"; },
      30s));
  EXPECT_EQ("h2", db_.Scalar("select host_id from pgfleet.jobs where id = " + cid));
}

// Schedulers keep hosts' labels between passes (hosts.config_version): an
// operator's edit of them in SQL is seen all the same.
TEST_F(FoundationTest, LabelsAnOperatorGivesAHostInSqlArePlacedOn) {
  // A first job, so the scheduler has both hosts' labels in hand.
  auto first = cluster_->Cli({"run", "--wait", "--", "true"});
  ASSERT_EQ(0, first.exit_code) << first.err;
  auto r = cluster_->Cli({"run", "--constraint", "zone=c", "--", "true"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  std::string id = util::Trim(r.out);
  EXPECT_EQ("pending", StateOnceItWaitsWithAReason(id));
  db_.Scalar("update pgfleet.hosts set labels = '{\"zone\": \"c\"}' where id = 'h1'");
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "succeeded"; },
      30s))
      << db_.Scalar("select state || ' ' || coalesce(error, '') from pgfleet.jobs where id = " + id)
      << cluster_->Logs();
  EXPECT_EQ("h1", db_.Scalar("select host_id from pgfleet.jobs where id = " + id));
}

TEST_F(FoundationTest, StopCancelsARunningJob) {
  auto r = cluster_->Cli({"run", "--stop-grace", "2", "--", "sleep", "60"});
  std::string id = util::Trim(r.out);
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "running"; },
      30s));
  auto s = cluster_->Cli({"stop", id});
  EXPECT_EQ(0, s.exit_code) << s.err;
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "cancelled"; },
      20s));
  EXPECT_EQ("15",
            db_.Scalar("select signal from pgfleet.jobs where id = " + id));  // SIGTERM was enough
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.allocation_drift"));
}

TEST_F(FoundationTest, HostdRefusesBadRequestsAndKeepsRunning) {
  std::string url = ApiUrl("h1");
  httplib::Client c(url);
  std::string good = R"({"jobs":[{"job":999999,"attempt":1,"spec":{"command":["true"]}}]})";
  auto no_token = c.Post("/v1/jobs", good, "application/json");
  ASSERT_TRUE(no_token);
  EXPECT_EQ(401, no_token->status);
  c.set_bearer_token_auth("wrong-token");
  auto wrong = c.Post("/v1/jobs", good, "application/json");
  EXPECT_EQ(401, wrong->status);
  c.set_bearer_token_auth(Token().c_str());
  auto malformed = c.Post("/v1/jobs", "{not json", "application/json");
  EXPECT_EQ(400, malformed->status);
  // A bad spec refuses only its own job, with the reason (hostd reports it
  // start_failed); the batch is answered.
  auto bad_spec = c.Post(
      "/v1/jobs",
      SignDispatch(db_, "h1",
                   R"({"jobs":[{"job":5,"attempt":1,"spec":{"command":["true"],"cpu":-1}}]})"),
      "application/json");
  EXPECT_EQ(200, bad_spec->status);
  auto refused = nlohmann::json::parse(bad_spec->body)["results"][0];
  EXPECT_EQ("failed", refused["status"]) << bad_spec->body;
  EXPECT_NE(std::string::npos, refused["error"].get<std::string>().find("cpu must be > 0"))
      << bad_spec->body;
  std::string huge = R"({"jobs":[],"pad":")" + std::string(5 << 20, 'x') + "\"}";
  auto big = c.Post("/v1/jobs", huge, "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(413, big->status);
  auto bad_id = c.Get("/v1/jobs/abc/logs");
  EXPECT_EQ(400, bad_id->status);
  // Still alive, and nothing was started by any of these.
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(200, health->status);
  auto list = c.Get("/v1/jobs");
  ASSERT_TRUE(list);
  EXPECT_EQ(0u, nlohmann::json::parse(list->body)["jobs"].size()) << list->body;
}

TEST_F(FoundationTest, UnreachableHostIsSuspendedAndItsJobsRunElsewhere) {
  // A host that heartbeats (row written here) but whose API does not answer,
  // smaller than the real ones so bin-packing prefers it.
  db_.Scalar(
      "select pgfleet.register_host('ghost', 'http://127.0.0.1:9', 1000, 1000, '{}', 'process', "
      "null)");
  auto r = cluster_->Cli({"run", "--", "echo", "survived"});
  std::string id = util::Trim(r.out);
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "succeeded"; },
      30s));
  EXPECT_NE("ghost", db_.Scalar("select host_id from pgfleet.jobs where id = " + id));
  EXPECT_EQ(1, db_.Count("select count(*) from pgfleet.job_events where job_id = " + id +
                         " and kind = 'requeued' and host_id = 'ghost'"));
  EXPECT_EQ("2", db_.Scalar("select attempt from pgfleet.jobs where id = " + id));
  // Suspended (the first suspension lasts 1 s, so on a loaded machine it may
  // be over by now: its count says it happened).
  EXPECT_EQ("t", db_.Scalar("select suspensions > 0 and suspended_until is not null"
                            " from pgfleet.hosts where id = 'ghost'"));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.allocation_drift"));
}

// Why a job waits is written when it changes, and only then: a scheduler's
// passes over a full host find the same reason every time (the tick looks
// once a second). The scheduler now writes reasons after its pass commits,
// and only those that differ from what it claimed; this keeps both halves of
// that true. Sampled for 3 s: the row is not written again (its xmin stays).
TEST_F(FoundationTest, AWaitingJobsReasonIsWrittenWhenItChangesAndOnlyThen) {
  std::string big_id =
      RunUntil({"--constraint", "zone=b", "--cpu", "3000", "--", "sleep", "30"}, "running");
  ASSERT_FALSE(HasFailure());
  auto r = cluster_->Cli({"run", "--constraint", "zone=b", "--cpu", "2000", "--", "true"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  std::string id = util::Trim(r.out);
  const std::string kWaiting = "waiting for capacity: needs 2000m cpu, 64 MiB memory";
  ASSERT_EQ("pending", StateOnceItWaitsWithAReason(id));
  EXPECT_EQ(kWaiting, db_.Scalar("select error from pgfleet.jobs where id = " + id));
  std::string xmin = db_.Scalar("select xmin from pgfleet.jobs where id = " + id);
  auto until = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(xmin, db_.Scalar("select xmin from pgfleet.jobs where id = " + id));
    std::this_thread::sleep_for(200ms);
  }
  // Another reason on the row (as an operator's note, or one from before):
  // the next pass puts the true one back.
  db_.Scalar("update pgfleet.jobs set error = 'stale' where id = " + id);
  EXPECT_TRUE(WaitFor(
      [&] { return db_.Scalar("select error from pgfleet.jobs where id = " + id) == kWaiting; },
      10s));
  ASSERT_EQ(0, cluster_->Cli({"stop", big_id}).exit_code);
  EXPECT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "succeeded"; },
      30s));
}

// A full queue: the first model::kReasonHead (32) jobs in placement order
// learn that they wait for capacity; the ones behind them, which only wait
// their turn, are not written for it (in a burst nearly every job waits a
// pass behind others); a job that can never fit is told so wherever it is.
TEST_F(FoundationTest, OnlyTheHeadOfAFullQueueIsToldItWaitsButAJobThatCanNeverRunIsTold) {
  std::string big_id =
      RunUntil({"--constraint", "zone=b", "--cpu", "4000", "--", "sleep", "60"}, "running");
  ASSERT_FALSE(HasFailure());
  db_.Scalar(
      "with ins as (insert into pgfleet.jobs (command, formation, cpu, constraints)"
      " select '{true}', 'queue', 1000, '{\"zone\": \"b\"}' from generate_series(1, 40)"
      " returning 1) select count(*) from ins");
  std::string never = db_.Scalar(
      "insert into pgfleet.jobs (command, formation, memory, constraints)"
      " values ('{true}', 'queue', 100000, '{\"zone\": \"b\"}') returning id");
  const std::string waits = "waiting for capacity: needs 1000m cpu, 64 MiB memory";
  auto count = [&](const std::string& where) {
    return db_.Count("select count(*) from pgfleet.jobs where formation = 'queue' and " + where);
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        return !db_.Scalar("select coalesce(error, '') from pgfleet.jobs where id = " + never)
                    .empty() &&
               count("error = '" + waits + "'") == 32;
      },
      20s));
  EXPECT_EQ("no host has 100000 MiB memory; largest has 8000",
            db_.Scalar("select error from pgfleet.jobs where id = " + never));
  // The head: the 32 lowest ids; behind them, nothing written, pass after pass.
  EXPECT_EQ(32, count("error = '" + waits +
                      "' and id < (select min(id) + 32 from pgfleet.jobs"
                      " where formation = 'queue')"));
  // sql/ops/why_pending.sql says where such a job stands instead.
  std::ifstream ops(std::string(PGFLEET_SOURCE_DIR) + "/sql/ops/why_pending.sql");
  std::string why((std::istreambuf_iterator<char>(ops)), std::istreambuf_iterator<char>());
  std::string last = db_.Scalar("select max(id) from pgfleet.jobs where id <> " + never +
                                " and formation = 'queue'");
  size_t from = why.find("select j.id");
  ASSERT_NE(std::string::npos, from) << why;
  std::string query = why.substr(from, why.find(';', from) - from);
  query.replace(query.find(":'job'"), 6, last);
  EXPECT_EQ("39", db_.Scalar("select ahead from (" + query + ") q where reason is null"));
  auto until = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(8, count("error is null and id <> " + never));
    ASSERT_EQ("pending", db_.Scalar("select state from pgfleet.jobs where id = " + never));
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_EQ(0, cluster_->Cli({"stop", big_id}).exit_code);
}

// A host whose dispatches failed before (its suspension over) and that takes
// a batch again starts its backoff from the beginning: the scheduler, which
// read its count of failures with the pass, resets it once the batch is taken.
// A job a pass could not assign because another transaction holds its host
// (another scheduler's pass placing on it, a report freeing it) is planned
// again on hosts the pass can lock: the held one counts as full, and the job
// goes to the next best host in the same pass instead of being planned onto
// the held one again and again.
TEST_F(FoundationTest, AJobGoesPastAHostAnotherTransactionHoldsWithoutWaitingForIt) {
  auto other = db_.Connect();
  pqxx::work holding(*other);
  holding.exec("select 1 from pgfleet.hosts where id = 'h1' for update");
  // h1 is the bin-packing choice (fuller after this job than h2 would be).
  std::string id = RunUntil({"--", "true"}, "succeeded");
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ("h2", db_.Scalar("select host_id from pgfleet.jobs where id = " + id));
  holding.abort();
  id = RunUntil({"--", "true"}, "succeeded");
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ("h1", db_.Scalar("select host_id from pgfleet.jobs where id = " + id));
}

TEST_F(FoundationTest, AHostThatTakesABatchAgainHasItsBackoffReset) {
  db_.Scalar("update pgfleet.hosts set suspensions = 3 where id = 'h2'");
  std::string id = RunUntil({"--constraint", "zone=b", "--", "true"}, "succeeded");
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ("h2", db_.Scalar("select host_id from pgfleet.jobs where id = " + id));
  EXPECT_TRUE(WaitFor(
      [&] { return db_.Count("select suspensions from pgfleet.hosts where id = 'h2'") == 0; },
      10s));
}

TEST_F(FoundationTest, CliRejectsBadFlagsWithExitCode2AndChangesNothing) {
  for (std::vector<std::string> args :
       std::vector<std::vector<std::string>>{{"run", "--cpu", "-5", "--", "true"},
                                             {"run", "--cpu", "abc", "--", "true"},
                                             {"run", "--memory", "0", "--", "true"},
                                             {"run", "--priority", "101", "--", "true"},
                                             {"run", "--env", "NOEQUALS", "--", "true"},
                                             {"run", "--network", "overlay", "--", "true"},
                                             {"run", "--bogus", "--", "true"},
                                             {"run"},
                                             {"ps", "--limit", "0"},
                                             {"inspect", "notanumber"},
                                             {"logs"},
                                             {"nosuchcommand"}}) {
    auto r = cluster_->Cli(args);
    EXPECT_EQ(2, r.exit_code) << args[0] << " " << (args.size() > 1 ? args[1] : "") << ": "
                              << r.err;
    EXPECT_FALSE(r.err.empty());
  }
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs"));
}

TEST_F(FoundationTest, HostdReconcileStartsAJobWhoseDispatchNeverArrived) {
  // Submit and assign in one transaction, as a scheduler that died right after
  // its commit would have left it: assigned, never dispatched.
  db_.Scalar(
      "select pgfleet.submit(array['echo', 'reconciled'], 'manual');"
      "select count(*) from pgfleet.assign_jobs(jsonb_build_array(jsonb_build_object("
      "  'job', (select max(id) from pgfleet.jobs), 'host', 'h1')))");
  std::string id = db_.Scalar("select max(id) from pgfleet.jobs");
  EXPECT_EQ("h1", db_.Scalar("select host_id from pgfleet.jobs where id = " + id));
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "succeeded"; },
      30s));
  EXPECT_EQ("reconciled\n", db_.Scalar("select output_tail from pgfleet.jobs where id = " + id));
  EXPECT_EQ(
      1, db_.Count("select count(*) from pgfleet.job_events where kind = 'running' and job_id = " +
                   id));
}

}  // namespace
}  // namespace pgfleet::testing
