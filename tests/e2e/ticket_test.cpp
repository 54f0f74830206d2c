// Host tickets (core/net/ticket.h, docs/security.md): what starts, stops or
// reads a job on a host is a ticket signed with that host's own key, never
// the cluster token alone. Real daemons, real PostgreSQL.

#include "core/net/ticket.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "core/net/http.h"
#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

class TicketTest : public OneHostClusterTest {
 protected:
  void SetUp() override {
    OneHostClusterTest::SetUp();
    client_ = std::make_unique<httplib::Client>(
        db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
    client_->set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
    key_ = HostTicketKey(db_, "h1");
  }
  // POST /v1/jobs with one job (privileged spec: the process driver runs only those).
  httplib::Result Start(int64_t job, const std::string& ticket) {
    json item{{"job", job},
              {"attempt", 1},
              {"spec", {{"command", {"sleep", "30"}}, {"privileged", true}}},
              {"ticket", ticket}};
    return client_->Post("/v1/jobs", json{{"jobs", {item}}}.dump(), "application/json");
  }
  std::string Sign(net::TicketKind kind, const std::string& host, int64_t job, int attempt,
                   bool privileged, int64_t expires, const std::string& key) {
    return net::SignTicket({kind, host, job, attempt, privileged, expires, ""}, key);
  }
  size_t JobsOnHost() {
    auto list = client_->Get("/v1/jobs");
    return list ? json::parse(list->body)["jobs"].size() : 0;
  }
  void ExpectRefused(const httplib::Result& res, int status, const std::string& words) {
    ASSERT_TRUE(res);
    EXPECT_EQ(status, res->status) << res->body;
    EXPECT_NE(std::string::npos, res->body.find(words)) << res->body;
  }

  std::unique_ptr<httplib::Client> client_;
  std::string key_;
};

TEST_F(TicketTest, OnlyAFreshTicketSignedWithThisHostsKeyForThisJobStartsIt) {
  int64_t now = net::UnixNow(), later = now + 60;
  const int64_t job = 900001;
  // The token alone starts nothing.
  auto no_ticket = client_->Post(
      "/v1/jobs",
      json{{"jobs", {{{"job", job}, {"attempt", 1}, {"spec", {{"command", {"true"}}}}}}}}.dump(),
      "application/json");
  ExpectRefused(no_ticket, 400, "jobs[0].ticket is required");
  // Signed with another key (a forger's, or another host's).
  ExpectRefused(
      Start(job, Sign(net::TicketKind::kDispatch, "h1", job, 1, true, later, net::NewTicketKey())),
      403, "signature does not match");
  // For another host, even with this host's key (a ticket taken from h2's traffic is h2's).
  ExpectRefused(Start(job, Sign(net::TicketKind::kDispatch, "h2", job, 1, true, later, key_)), 403,
                "is for host h2");
  // Expired.
  ExpectRefused(Start(job, Sign(net::TicketKind::kDispatch, "h1", job, 1, true, now - 5, key_)),
                403, "expired");
  // For another job or attempt, or another action.
  ExpectRefused(Start(job, Sign(net::TicketKind::kDispatch, "h1", job + 1, 1, true, later, key_)),
                403, "not job 900001");
  ExpectRefused(Start(job, Sign(net::TicketKind::kDispatch, "h1", job, 2, true, later, key_)), 403,
                "not job 900001 attempt 1");
  ExpectRefused(Start(job, Sign(net::TicketKind::kLogs, "h1", job, 1, true, later, key_)), 403,
                "is for logs, not dispatch");
  // Tampered: a ticket for an unprivileged job made privileged.
  std::string plain = Sign(net::TicketKind::kDispatch, "h1", job, 1, false, later, key_);
  std::string tampered = plain;
  tampered[tampered.find(":0:" + std::to_string(later)) + 1] = '1';
  ExpectRefused(Start(job, tampered), 403, "signature does not match");
  ExpectRefused(Start(job, "v1:dispatch:h1:x"), 403, "ticket is not of the form");
  EXPECT_EQ(0u, JobsOnHost());

  // The real thing starts it, once: the same ticket again is refused.
  std::string good = Sign(net::TicketKind::kDispatch, "h1", job, 1, true, later, key_);
  auto started = Start(job, good);
  ASSERT_TRUE(started);
  ASSERT_EQ(200, started->status) << started->body;
  EXPECT_EQ("started", json::parse(started->body)["results"][0]["status"]) << started->body;
  ExpectRefused(Start(job, good), 403, "already used");
  EXPECT_EQ(1u, JobsOnHost());

  // Stopping it takes a stop ticket for it: not the token, not its dispatch ticket.
  auto path = "/v1/jobs/" + std::to_string(job) + "/stop?attempt=1";
  ExpectRefused(client_->Post(path, "", "application/json"), 403, "X-Pgfleet-Ticket: no ticket");
  auto stop_with = [&](const std::string& t) {
    return client_->Post(path, httplib::Headers{{"X-Pgfleet-Ticket", t}}, "", "application/json");
  };
  ExpectRefused(stop_with(Sign(net::TicketKind::kDispatch, "h1", job, 1, true, later, key_)), 403,
                "is for dispatch, not stop");
  ExpectRefused(stop_with(Sign(net::TicketKind::kStop, "h1", job + 1, 1, false, later, key_)), 403,
                "not job 900001");
  std::string stop = Sign(net::TicketKind::kStop, "h1", job, 1, false, later, key_);
  // A force flag that is not 0 or 1 is refused, naming it, and stops nothing.
  auto bad_force = client_->Post(path + "&force=yes", httplib::Headers{{"X-Pgfleet-Ticket", stop}},
                                 "", "application/json");
  ExpectRefused(bad_force, 400, "force must be 0 or 1");
  auto stopped = stop_with(stop);
  ASSERT_TRUE(stopped);
  EXPECT_EQ(200, stopped->status) << stopped->body;
  ExpectRefused(stop_with(stop), 403, "already used");
  // Refusals are counted.
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(std::string::npos, metrics->body.find("pgfleet_host_api_tickets_refused_total"));
}

// The tickets a host took are kept in its data dir: a ticket captured from
// the network and replayed after the host restarted is still refused.
TEST_F(TicketTest, AUsedTicketIsRefusedAfterTheHostRestarts) {
  const int64_t job = 900003;
  std::string good = Sign(net::TicketKind::kDispatch, "h1", job, 1, true, net::UnixNow() + 60, key_);
  auto started = Start(job, good);
  ASSERT_TRUE(started);
  ASSERT_EQ(200, started->status) << started->body;
  std::string stop = Sign(net::TicketKind::kStop, "h1", job, 1, false, net::UnixNow() + 60, key_);
  auto path = "/v1/jobs/" + std::to_string(job) + "/stop?attempt=1";
  auto stopped =
      client_->Post(path, httplib::Headers{{"X-Pgfleet-Ticket", stop}}, "", "application/json");
  ASSERT_TRUE(stopped);
  EXPECT_EQ(200, stopped->status) << stopped->body;

  // hostd restarts, same id and data dir.
  const long long generation = db_.Count("select generation from pgfleet.hosts where id = 'h1'");
  cluster_->processes()[1]->Stop();
  cluster_->StartHost("h1", 4000, 4000);
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Count("select generation from pgfleet.hosts where id = 'h1'") > generation; },
      20s));
  ASSERT_TRUE(cluster_->WaitHostsUp(1));
  client_ = std::make_unique<httplib::Client>(
      db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
  client_->set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
  ExpectRefused(Start(job, good), 403, "already used");
  ExpectRefused(
      client_->Post(path, httplib::Headers{{"X-Pgfleet-Ticket", stop}}, "", "application/json"),
      403, "already used");
  // A fresh ticket still works.
  auto fresh = client_->Post(
      path,
      httplib::Headers{{"X-Pgfleet-Ticket", Sign(net::TicketKind::kStop, "h1", job, 1, false,
                                                 net::UnixNow() + 60, key_)}},
      "", "application/json");
  ASSERT_TRUE(fresh);
  EXPECT_NE(403, fresh->status) << fresh->body;
}

TEST_F(TicketTest, ADispatchWhoseTicketIsNotPrivilegedRunsNoPrivilegedSpec) {
  // The spec claims privileged; the ticket (what the scheduler signed from
  // jobs.privileged) does not: hostd goes by the ticket.
  json item{{"job", 900010},
            {"attempt", 1},
            {"spec", {{"command", {"id"}}, {"privileged", true}, {"network", "host"}}},
            {"ticket",
             Sign(net::TicketKind::kDispatch, "h1", 900010, 1, false, net::UnixNow() + 60, key_)}};
  auto res = client_->Post("/v1/jobs", json{{"jobs", {item}}}.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(200, res->status) << res->body;
  auto result = json::parse(res->body)["results"][0];
  EXPECT_EQ("failed", result["status"]) << res->body;
  EXPECT_NE(std::string::npos, result["error"].get<std::string>().find("runs only privileged jobs"))
      << res->body;
}

TEST_F(TicketTest, LogsAreReadWithATicketOnlyOwnersAndOperatorsGet) {
  std::string alice = db_.CreateLogin("alice", {"pgfleet_submitter", "pgfleet_privileged"});
  std::string bob = db_.CreateLogin("bob", {"pgfleet_submitter"});
  std::string reader = db_.CreateLogin("reader", {"pgfleet_reader"});
  std::string op = db_.CreateLogin("op", {"pgfleet_operator"});
  // 5 KiB of output: more than the 4 KiB tail the database keeps, so the
  // whole of it can only have come from the host.
  auto run = cluster_->CliNoToken(
      db_.DsnAs(alice),
      {"run", "--wait", "--", "sh", "-c", "for i in $(seq 1 1000); do echo line$i; done"});
  ASSERT_EQ(0, run.exit_code) << run.err;
  std::string id = db_.Scalar("select max(id) from pgfleet.jobs");
  EXPECT_NE(std::string::npos, run.out.find("line1\n")) << run.out.substr(0, 200);

  // Alice, without any token, reads all of it from the host.
  auto logs = cluster_->CliNoToken(db_.DsnAs(alice), {"logs", id});
  ASSERT_EQ(0, logs.exit_code) << logs.err;
  EXPECT_EQ(0u, logs.out.find("line1\n")) << logs.out.substr(0, 200);
  EXPECT_NE(std::string::npos, logs.out.find("line1000\n"));
  EXPECT_EQ(std::string::npos, logs.err.find("kept in the database")) << logs.err;
  // So does an operator.
  auto op_logs = cluster_->CliNoToken(db_.DsnAs(op), {"logs", id});
  ASSERT_EQ(0, op_logs.exit_code) << op_logs.err;
  EXPECT_EQ(0u, op_logs.out.find("line1\n")) << op_logs.out.substr(0, 200);

  // Nobody else gets a ticket: bob (another submitter) and a reader.
  for (const std::string& who : {bob, reader}) {
    pqxx::connection c(db_.DsnAs(who));
    pqxx::nontransaction tx(c);
    try {
      tx.exec("select * from pgfleet.log_ticket(" + id + ")");
      ADD_FAILURE() << who << " got a log ticket for alice's job";
    } catch (const pqxx::insufficient_privilege& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find("only its owner and operators"))
          << e.what();
    }
  }
  // A reader's `pgfleet logs` says so and shows only the database's tail.
  auto reader_logs = cluster_->CliNoToken(db_.DsnAs(reader), {"logs", id});
  EXPECT_NE(std::string::npos, reader_logs.err.find("may not read its output")) << reader_logs.err;
  EXPECT_EQ(std::string::npos, reader_logs.out.find("line1\n"));

  // A ticket is for one job and is taken once.
  std::string ticket = db_.Scalar("select ticket from pgfleet.log_ticket(" + id + ")");
  httplib::Client anonymous(db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
  auto read = [&](const std::string& job) {
    return anonymous.Get(("/v1/jobs/" + job + "/logs").c_str(),
                         httplib::Headers{{"X-Pgfleet-Ticket", ticket}});
  };
  auto other = read(std::to_string(std::stoll(id) + 1000));
  ASSERT_TRUE(other);
  EXPECT_EQ(403, other->status) << other->body;
  auto first = read(id);
  ASSERT_TRUE(first);
  EXPECT_EQ(200, first->status) << first->body;
  auto again = read(id);
  ASSERT_TRUE(again);
  EXPECT_EQ(403, again->status) << again->body;
  EXPECT_NE(std::string::npos, again->body.find("already used")) << again->body;
  // Without a ticket or the token, nothing.
  auto bare = anonymous.Get(("/v1/jobs/" + id + "/logs").c_str());
  ASSERT_TRUE(bare);
  EXPECT_EQ(401, bare->status);
}

TEST_F(TicketTest, KeysAreTheHostsOwnAndOnlySchedulersReadThem) {
  // hostd made its key once and keeps it: a restart registers the same one.
  std::string file = cluster_->dir() + "/h1/ticket.key";
  EXPECT_EQ(key_ + "\n", util::ReadFile(file));
  // The SQL HMAC (log tickets) and OpenSSL's (hostd) agree; RFC 4231 case 1.
  EXPECT_EQ("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            db_.Scalar("select pgfleet.hmac_sha256(decode(repeat('0b', 20), 'hex'), 'Hi There')"));
  EXPECT_EQ(net::HmacSha256Hex(key_, "v1:logs:h1:1:1:0:99:0123456789abcdef"),
            db_.Scalar("select pgfleet.hmac_sha256(decode('" + key_ +
                       "', 'hex'), 'v1:logs:h1:1:1:0:99:0123456789abcdef')"));
  // Operators and readers cannot read keys (an operator with one could sign a
  // privileged dispatch); a host login cannot set another host's key.
  std::string op = db_.CreateLogin("op", {"pgfleet_operator"});
  std::string hostd = db_.CreateLogin("hostd", {"pgfleet_host"});
  db_.Scalar("insert into pgfleet.host_logins (login, host_id) values ('" + hostd + "', 'h2')");
  auto refused = [&](const std::string& login, const std::string& sql, const std::string& words) {
    pqxx::connection c(db_.DsnAs(login));
    pqxx::nontransaction tx(c);
    try {
      tx.exec(sql);
      ADD_FAILURE() << login << ": " << sql << " was not refused";
    } catch (const pqxx::sql_error& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find(words)) << e.what();
    }
  };
  refused(op, "select key from pgfleet.host_keys", "permission denied");
  refused(hostd, "select pgfleet.set_host_key('h1', repeat('ab', 32))", "may not act for host h1");
  refused(hostd, "select pgfleet.set_host_key('h2', 'not-hex')", "64 lowercase hex digits");
  EXPECT_EQ(key_, HostTicketKey(db_, "h1"));
  // A restarted hostd keeps its key (the dispatch keeps working).
  auto& h1 = *cluster_->processes().back();
  h1.Stop();
  cluster_->StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster_->WaitHostsUp(1));
  EXPECT_EQ(key_, HostTicketKey(db_, "h1"));
  auto r = cluster_->Cli({"run", "--wait", "--", "echo", "after-restart"});
  EXPECT_EQ(0, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.out.find("after-restart"));
}

}  // namespace
}  // namespace pgfleet::testing
