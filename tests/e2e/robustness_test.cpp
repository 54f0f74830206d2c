// Robustness (issue 14): one bad request or row affects only itself, gets an
// error naming the field and the rule, and never crashes a daemon or costs
// another job its run. Real daemons, real PostgreSQL.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/net/http.h"
#include "core/util/text.h"
#include "hostile_traffic.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class RobustnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(db_);
    cluster_->StartScheduler("s1");
    host_ = &cluster_->StartHost("h1", 4000, 4000);
    ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
    client_ = std::make_unique<httplib::Client>(
        db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
    client_->set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
    client_->set_read_timeout(20, 0);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs();
  }
  // A job submitted now runs and succeeds: the host still works for others.
  void ExpectAJobStillRuns() {
    auto r = cluster_->Cli({"run", "--wait", "--", "echo", "still-here"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("still-here"), std::string::npos) << r.out;
  }
  void ExpectHostdAlive() {
    EXPECT_TRUE(host_->Running()) << host_->Log();
    auto health = client_->Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  Process* host_ = nullptr;
  std::unique_ptr<httplib::Client> client_;
};

std::string Nested(int depth, const std::string& leaf) {
  return std::string(static_cast<size_t>(depth), '[') + leaf +
         std::string(static_cast<size_t>(depth), ']');
}

TEST_F(RobustnessTest, DeeplyNestedJsonIsRefusedNamingTheRuleAndHostdKeepsRunning) {
  // 100,000 levels in the spec, in an env value, and as the whole body.
  for (const std::string& body :
       {R"({"jobs":[{"job":7,"attempt":1,"spec":)" + Nested(100000, "1") + "}]}",
        R"({"jobs":[{"job":7,"attempt":1,"spec":{"command":["true"],"env":{"A":)" +
            Nested(100000, "\"x\"") + "}}}]}",
        Nested(100000, "")}) {
    auto res = client_->Post("/v1/jobs", body, "application/json");
    ASSERT_TRUE(res) << "hostd did not answer";
    EXPECT_EQ(res->status, 400);
    EXPECT_NE(res->body.find("must not nest arrays and objects deeper than 32 levels"),
              std::string::npos)
        << res->body.substr(0, 300);
  }
  // Brackets inside strings are text, not nesting.
  std::string in_string = R"({"jobs":[{"job":8,"attempt":1,"spec":{"command":["echo",")" +
                          std::string(1000, '[') + R"("]}}]})";
  auto ok = client_->Post("/v1/jobs", SignDispatch(db_, "h1", in_string), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  ExpectHostdAlive();
  ExpectAJobStillRuns();
}

TEST_F(RobustnessTest, StoppingAnAttemptTheHostNeverHadIs404AndCreatesNothing) {
  // The id the next job will get.
  long long next = db_.Count("select nextval(pg_get_serial_sequence('pgfleet.jobs', 'id'))") + 1;
  auto before = Subdirs(cluster_->dir() + "/h1/jobs");
  for (long long id : {next, next + 1000, 9223372036854775807LL}) {
    auto res = client_->Post("/v1/jobs/" + std::to_string(id) + "/stop?attempt=1",
                             httplib::Headers{{"X-Pgfleet-Ticket", StopTicket(db_, "h1", id, 1)}},
                             "", "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 404) << id << ": " << res->body;
    EXPECT_NE(res->body.find("not known to this host"), std::string::npos) << res->body;
  }
  EXPECT_EQ(Subdirs(cluster_->dir() + "/h1/jobs"), before);
  // Past 64 bits is not an id at all.
  auto too_big =
      client_->Post("/v1/jobs/9223372036854775808/stop?attempt=1", "", "application/json");
  ASSERT_TRUE(too_big);
  EXPECT_EQ(too_big->status, 400);
  // The job that later gets that id runs (it is not "stopped before it started").
  auto r = cluster_->Cli({"run", "--wait", "--", "echo", "ran"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(db_.Scalar("select max(id) from pgfleet.jobs"), std::to_string(next));
  EXPECT_EQ(db_.Scalar("select state from pgfleet.jobs where id = " + std::to_string(next)),
            "succeeded");
  ExpectHostdAlive();
}

TEST_F(RobustnessTest, AJobCancelledBeforeItsDispatchArrivedEndsCancelled) {
  // Assigned to h1 in the database but never dispatched (as a scheduler that
  // died after its commit leaves it), then cancelled: reconcile must end it.
  // All in one transaction: a reconcile (every second) that ran between the
  // assignment and the cancel would rightly start the job (it did, on a
  // loaded CI machine, when the cancel came from a separate `pgfleet stop`).
  db_.Scalar(
      "select pgfleet.submit(array['sleep', '600'], 'manual');"
      "select count(*) from pgfleet.assign_jobs(jsonb_build_array(jsonb_build_object("
      "  'job', (select max(id) from pgfleet.jobs), 'host', 'h1')));"
      "select pgfleet.cancel((select max(id) from pgfleet.jobs))");
  std::string id = db_.Scalar("select max(id) from pgfleet.jobs");
  EXPECT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "cancelled"; },
      20s))
      << db_.Scalar("select state || ' ' || coalesce(error, '') from pgfleet.jobs where id = " +
                    id);
  EXPECT_EQ(
      db_.Count("select count(*) from pgfleet.job_events where kind = 'running' and job_id = " +
                id),
      0);
}

TEST_F(RobustnessTest, HttpErrorsSayWhatWasWrong) {
  // A form-encoded body over httplib's 8 KiB form limit is not "over 1 MiB".
  auto form = client_->Post("/v1/jobs", "a=" + std::string(10000, 'x'),
                            "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 413);
  EXPECT_NE(form->body.find("form-encoded bodies over 8 KiB"), std::string::npos) << form->body;
  auto big = client_->Post("/v1/jobs", std::string(2 << 20, 'x'), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_NE(big->body.find("over 1 MiB"), std::string::npos) << big->body;
  auto nowhere = client_->Get("/v1/nowhere");
  ASSERT_TRUE(nowhere);
  EXPECT_EQ(nowhere->status, 404);
  EXPECT_NE(nowhere->body.find("no such endpoint"), std::string::npos) << nowhere->body;
  ExpectHostdAlive();
}

TEST_F(RobustnessTest, ReplicasAreCappedAndTheCliTakesOnlyWholeNumbers) {
  auto r = cluster_->Cli(
      {"formation", "create", "web", "--kind", "service", "--replicas", "1", "--", "sleep", "600"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (std::string bad : {"3x", "", "1e3", " 2", "+3"}) {
    r = cluster_->Cli({"formation", "scale", "web", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("replicas must be a whole number >= 0"), std::string::npos) << r.err;
  }
  EXPECT_EQ(cluster_->Cli({"formation", "scale", "web", "-1"}).exit_code, 2);
  r = cluster_->Cli({"formation", "scale", "web", "2147483647"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("replicas must be <= 10000 (setting max_replicas"), std::string::npos)
      << r.err;
  EXPECT_EQ(db_.Scalar("select replicas from pgfleet.formations where name = 'web'"), "1");
  // By SQL too, and the setting moves the cap.
  EXPECT_THROW(db_.Scalar("update pgfleet.formations set replicas = 10001 where name = 'web'"),
               std::exception);
  db_.Scalar("insert into pgfleet.settings (name, value) values ('max_replicas', '20000')");
  db_.Scalar("update pgfleet.formations set replicas = 10001 where name = 'web'");
  db_.Scalar("update pgfleet.formations set replicas = 2 where name = 'web'");
  EXPECT_TRUE(WaitFor(
      [&] {
        return db_.Count(
                   "select count(*) from pgfleet.jobs where formation = 'web' and state = "
                   "'running'") == 2;
      },
      30s));
}

// Finding 2: one report the database refuses (the retry-backoff overflow did
// this) used to fail every step of its host: no heartbeat, a self-fence that
// killed the host's innocent jobs, re-registration, again and again. Now the
// batch is halved until the bad report is alone; it is set aside and retried
// alone, and everything else goes on.
TEST_F(RobustnessTest, AReportTheDatabaseRefusesIsSetAsideWhileTheHostHeartbeatsAndRunsTheRest) {
  // Ending job "bad" fails in SQL, as a data error (numeric overflow).
  db_.Scalar(
      "create function test_refuse_end() returns trigger language plpgsql as $$ begin "
      "raise exception 'value out of range (test)' using errcode = '22003'; end $$");
  db_.Scalar(
      "create trigger refuse_end before update on pgfleet.jobs for each row when "
      "(new.env ? 'REFUSE_END' and new.state in ('succeeded', 'failed', 'pending')) "
      "execute function test_refuse_end()");
  std::string generation = db_.Scalar("select generation from pgfleet.hosts where id = 'h1'");
  std::string bad = db_.Scalar(
      "insert into pgfleet.jobs (command, env) values ('{sleep,0.2}', '{\"REFUSE_END\":\"1\"}') "
      "returning id");
  // Others finish while the bad report is stuck; some in the same batches.
  db_.Scalar("insert into pgfleet.jobs (command) select '{sleep,0.2}' from generate_series(1, 30)");
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == 30;
      },
      30s))
      << db_.Scalar("select string_agg(id || '=' || state, ' ') from pgfleet.jobs");
  ASSERT_TRUE(WaitFor([&] { return host_->Log().find("set aside") != std::string::npos; }, 10s));
  // Heartbeats went on: no fence, no new generation.
  std::this_thread::sleep_for(3s);  // well past the fence time were heartbeats stuck
  std::string log = host_->Log();
  EXPECT_EQ(std::string::npos, log.find("self-fenced")) << log;
  EXPECT_EQ(generation, db_.Scalar("select generation from pgfleet.hosts where id = 'h1'"));
  EXPECT_NE(std::string::npos, log.find("job=" + bad + " attempt=1 report exited set aside"))
      << log;
  EXPECT_NE(std::string::npos, log.find("value out of range (test)")) << log;
  EXPECT_EQ("running", db_.Scalar("select state from pgfleet.jobs where id = " + bad));
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(std::string::npos, metrics->body.find("pgfleet_host_reports_quarantined_total 1"))
      << metrics->body;
  EXPECT_EQ(31, db_.Count("select count(*) from pgfleet.job_events where kind = 'running'"));
  EXPECT_EQ(0, db_.AttemptsWithRepeated("running"));

  // Once the database takes it, the report set aside goes through.
  db_.Scalar("drop trigger refuse_end on pgfleet.jobs");
  EXPECT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + bad) == "succeeded"; },
      10s))
      << host_->Log();
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs where attempt <> 1"));
  ExpectHostdAlive();
}

// Hostile requests against every host (malformed, slow, oversized, nested,
// unauthorized with a body, unknown attempts) while ordinary jobs arrive:
// no job waits longer than the host TTL, no host is suspended or fenced.
TEST_F(RobustnessTest, HostileTrafficAgainstEveryHostDelaysNoJobBeyondTheTtl) {
  Process* h2 = &cluster_->StartHost("h2", 4000, 4000);
  ASSERT_TRUE(cluster_->WaitHostsUp(2)) << cluster_->Logs();
  std::vector<HostileTarget> targets;
  std::istringstream urls(db_.Scalar("select string_agg(api_url, ' ') from pgfleet.hosts"));
  for (std::string url; urls >> url;) targets.push_back({PortOf(url), ""});
  ASSERT_EQ(2u, targets.size());
  HostileTraffic hostile([&] { return targets; }, net::ReadTokenFile(cluster_->token_file()));
  std::this_thread::sleep_for(4s);  // the slow senders are in place
  for (int i = 0; i < 40; ++i) {    // over 10 s: past the request deadline
    db_.Scalar("insert into pgfleet.jobs (formation, command) values ('steady', '{sleep,0.1}')");
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_TRUE(WaitFor(
      [&] {
        return db_.Count(
                   "select count(*) from pgfleet.jobs where formation = 'steady' and "
                   "state = 'succeeded'") == 40;
      },
      60s))
      << db_.Scalar("select string_agg(id || '=' || state, ' ') from pgfleet.jobs");
  hostile.Stop();
  std::cout << "hostile: sent=" << hostile.sent() << " slow_cut=" << hostile.slow_cut()
            << " max_wait_s="
            << db_.Scalar(
                   "select max(extract(epoch from started_at - created_at)) from "
                   "pgfleet.jobs where formation = 'steady'")
            << "\n";
  EXPECT_GT(hostile.sent(), 40);
  EXPECT_GT(hostile.slow_cut(), 0) << "no slow sender was cut off";
  // Started within the TTL (10 s by default) of their insert, first attempt.
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs where formation = 'steady' and "
                         "(started_at - created_at > pgfleet.host_ttl() or attempt <> 1)"));
  EXPECT_EQ(0, db_.Count("select coalesce(sum(suspensions), 0) from pgfleet.hosts"));
  EXPECT_EQ("1 1", db_.Scalar("select string_agg(generation::text, ' ' order by id) from "
                              "pgfleet.hosts"));
  EXPECT_TRUE(h2->Running()) << h2->Log();
  ExpectHostdAlive();
}

// hostd's resident high-water mark, in MiB.
long PeakRssMiB(pid_t pid) {
  std::istringstream status(util::ReadFile("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6)) / 1024;
  }
  return -1;
}

// Finding 6: reading one line of a 400 MB log loaded the whole file, for
// every request at once. Now the tail is found by reading backwards and the
// log is streamed a chunk at a time.
TEST_F(RobustnessTest, TailOfAHugeLogReadsABoundedAmountWhateverTheLogsSize) {
  auto r = cluster_->Cli({"run", "--wait", "--", "echo", "first"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  std::string id = db_.Scalar("select max(id) from pgfleet.jobs");
  std::string log = cluster_->dir() + "/h1/jobs/" + id + "-1/output.log";
  ASSERT_EQ(0, truncate(log.c_str(), 400ll << 20)) << log;  // sparse: 400 MiB of zeros
  { std::ofstream(log, std::ios::app) << "\ntail-line-1\ntail-line-2\n"; }
  long before = PeakRssMiB(host_->pid());
  std::vector<std::thread> readers;
  std::atomic<int> right{0};
  for (int i = 0; i < 6; ++i) {
    readers.emplace_back([&] {
      httplib::Client c(db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
      c.set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
      c.set_read_timeout(30, 0);
      auto res = c.Get("/v1/jobs/" + id + "/logs?tail=1");
      if (res && res->status == 200 && res->body == "tail-line-2\n") ++right;
      auto two = c.Get("/v1/jobs/" + id + "/logs?tail=2");
      if (two && two->status == 200 && two->body == "tail-line-1\ntail-line-2\n") ++right;
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(12, right.load());
  long after = PeakRssMiB(host_->pid());
  std::cout << "log tail: hostd peak RSS " << before << " MiB before, " << after << " MiB after\n";
  EXPECT_LT(after, before + 64) << "hostd's memory grew with the log's size";

  auto too_many = client_->Get("/v1/jobs/" + id + "/logs?tail=100001");
  ASSERT_TRUE(too_many);
  EXPECT_EQ(400, too_many->status);
  EXPECT_NE(std::string::npos, too_many->body.find("tail must be at most 100000 lines"))
      << too_many->body;
  ExpectHostdAlive();
}

// Reads until the peer closes or 5 s pass without data.
std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Finding 7: 16 connections sending a header line every 2 s froze the API
// (each held one of httplib's few threads). Now every admitted connection
// has a thread, and one still sending its request 10 s after it began is
// closed.
TEST_F(RobustnessTest, SlowSendersWithoutATokenNeitherBlockTheApiNorStayOpen) {
  int port = PortOf(db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
  std::vector<int> slow;
  for (int i = 0; i < 40; ++i) {
    int fd = ConnectLoopback(port, 5);
    ASSERT_GE(fd, 0);
    ASSERT_GT(send(fd, "POST /v1/jobs HTTP/1.1\r\n", 24, MSG_NOSIGNAL), 0);
    slow.push_back(fd);
  }
  auto started = std::chrono::steady_clock::now();
  // Meanwhile the API answers at once, and work is dispatched and runs.
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(2s);
    for (int fd : slow) send(fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL);
    auto t0 = std::chrono::steady_clock::now();
    auto health = client_->Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(200, health->status);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  }
  ExpectAJobStillRuns();
  // Every slow sender is cut off by the request deadline (10 s).
  int closed = 0;
  for (int fd : slow) {
    while (std::chrono::steady_clock::now() - started < 20s) {
      if (send(fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL) < 0) break;
      char c;
      if (recv(fd, &c, 1, MSG_DONTWAIT) == 0) break;
      std::this_thread::sleep_for(500ms);
    }
    if (std::chrono::steady_clock::now() - started < 20s) ++closed;
    close(fd);
  }
  EXPECT_EQ(40, closed);
  EXPECT_NE(std::string::npos, host_->Log().find("too slow")) << host_->Log();
  ExpectHostdAlive();
}

// Finding 9: an unauthorized request's body was left unread, so the next
// request on the same keep-alive connection was parsed from it and got 400.
// Now the 401 closes the connection; and a body without Content-Length is
// refused saying so.
TEST_F(RobustnessTest, AnUnauthorizedRequestsConnectionIsClosedAfterThe401) {
  int port = PortOf(db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
  int fd = ConnectLoopback(port, 5);
  ASSERT_GE(fd, 0);
  std::string body = "{\"jobs\":[{\"job\":1,\"attempt\":1,\"spec\":{\"command\":[\"true\"]}}]}";
  std::string two =
      "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body +
      "GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
      net::ReadTokenFile(cluster_->token_file()) + "\r\n\r\n";
  ASSERT_EQ(static_cast<ssize_t>(two.size()), send(fd, two.data(), two.size(), MSG_NOSIGNAL));
  std::string answer = ReadAll(fd);
  close(fd);
  EXPECT_EQ(0u, answer.find("HTTP/1.1 401")) << answer;
  EXPECT_NE(std::string::npos, answer.find("Connection: close")) << answer;
  EXPECT_EQ(std::string::npos, answer.find("HTTP/1.1 400")) << answer;
  EXPECT_EQ(answer.find("HTTP/1.1 "), answer.rfind("HTTP/1.1 ")) << "two answers: " << answer;

  fd = ConnectLoopback(port, 5);
  ASSERT_GE(fd, 0);
  std::string no_length = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                          net::ReadTokenFile(cluster_->token_file()) +
                          "\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{}";
  send(fd, no_length.data(), no_length.size(), MSG_NOSIGNAL);
  answer = ReadAll(fd);
  close(fd);
  EXPECT_NE(std::string::npos, answer.find("a request body needs a Content-Length header"))
      << answer;
  ExpectHostdAlive();
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs"));
}

// Finding 4: 500 jobs with a 2.5 KB env each made one dispatch body over
// hostd's 1 MiB limit: HTTP 413 on every pass, the host suspended, the jobs
// delayed for minutes. Now a host's batch is split by size.
TEST_F(RobustnessTest, ADispatchBatchOverTheBodyLimitIsSplitAndEveryJobRunsOnce) {
  db_.Scalar(
      "insert into pgfleet.jobs (formation, command, cpu, memory, env) select 'wide', '{true}', "
      "1, 1, jsonb_build_object('PAD', repeat('p', 2500)) from generate_series(1, 500)");
  EXPECT_TRUE(WaitFor(
      [&] {
        return db_.Count(
                   "select count(*) from pgfleet.jobs where formation = 'wide' and "
                   "state = 'succeeded'") == 500;
      },
      120s))
      << db_.Scalar(
             "select string_agg(state || '=' || n, ' ') from (select state, count(*) n "
             "from pgfleet.jobs group by state) s");
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_events where kind = 'requeued'"))
      << db_.Scalar("select min(detail) from pgfleet.job_events where kind = 'requeued'");
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs where attempt <> 1"));
  EXPECT_EQ(0, db_.Count("select coalesce(sum(suspensions), 0) from pgfleet.hosts"));
  ExpectHostdAlive();
}

// Finding 3: one job hostd refuses failed its whole dispatch batch (HTTP 400),
// so every job of it, of any formation, went back to pending, again and again.
// Now each job of a batch is accepted or refused on its own.
TEST_F(RobustnessTest, OneRefusedJobInADispatchBatchFailsAloneWithItsReason) {
  std::string batch = R"({"jobs":[
      {"job":900001,"attempt":1,"spec":{"command":["true"],"privileged":true}},
      {"job":900002,"attempt":1,"spec":{"command":["true"],"env":{"=x":"y"}}},
      {"job":900003,"attempt":1,"spec":{"command":["true"],"cpu":-5}},
      {"job":900004,"attempt":1,"spec":{"command":["true"],"privileged":true}}]})";
  auto res = client_->Post("/v1/jobs", SignDispatch(db_, "h1", batch), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(200, res->status) << res->body;
  auto results = nlohmann::json::parse(res->body)["results"];
  ASSERT_EQ(4u, results.size()) << res->body;
  EXPECT_EQ("started", results[0]["status"]) << res->body;
  EXPECT_EQ("failed", results[1]["status"]) << res->body;
  EXPECT_NE(std::string::npos, results[1]["error"].get<std::string>().find(
                                   "env names must be non-empty and contain no '='"))
      << res->body;
  EXPECT_EQ("failed", results[2]["status"]) << res->body;
  EXPECT_NE(std::string::npos, results[2]["error"].get<std::string>().find("cpu must be > 0"))
      << res->body;
  EXPECT_EQ("started", results[3]["status"]) << res->body;
  ExpectHostdAlive();
}

}  // namespace
}  // namespace pgfleet::testing
