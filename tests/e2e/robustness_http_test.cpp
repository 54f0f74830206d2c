// Robustness of hostd's HTTP API against malformed requests (issue 14):
// JSON nested too deep, a stop for an attempt the host never had, bodies
// over the limits, unknown endpoints, an unauthorized request with a body
// on a keep-alive connection. Each is refused with an error naming the rule,
// and hostd keeps running and serving. Real daemons, real PostgreSQL.

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "core/net/http.h"
#include "hostile_traffic.h"
#include "robustness_fixture.h"

namespace pgfleet::testing::robustness {
namespace {

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

TEST_F(RobustnessTest, HttpErrorsSayWhatWasWrong) {
  // A form-encoded body over httplib's 8 KiB form limit is not "over 1 MiB".
  auto form = client_->Post("/v1/jobs", "a=" + std::string(10000, 'x'),
                            "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 413);
  EXPECT_NE(form->body.find("form-encoded bodies over 8 KiB"), std::string::npos) << form->body;
  // POST /v1/jobs takes up to 4 MiB (a job's 1 MiB of files, escaped), others 1 MiB.
  auto big = client_->Post("/v1/jobs", std::string(5 << 20, 'x'), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_NE(big->body.find("over 4 MiB"), std::string::npos) << big->body;
  auto big_stop = client_->Post("/v1/jobs/1/stop?attempt=1", std::string(2 << 20, 'x'),
                                "application/json");
  ASSERT_TRUE(big_stop);
  EXPECT_EQ(big_stop->status, 413);
  EXPECT_NE(big_stop->body.find("over 1 MiB"), std::string::npos) << big_stop->body;
  auto nowhere = client_->Get("/v1/nowhere");
  ASSERT_TRUE(nowhere);
  EXPECT_EQ(nowhere->status, 404);
  EXPECT_NE(nowhere->body.find("no such endpoint"), std::string::npos) << nowhere->body;
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

}  // namespace
}  // namespace pgfleet::testing::robustness
