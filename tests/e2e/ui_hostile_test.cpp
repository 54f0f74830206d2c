// The dashboard under hostile input (issue 39, item 2): bad filters get a
// 400 naming the parameter and its rule, bad ids and unknown routes a 4xx,
// every method but GET a 405, asset paths never leave the built-in assets,
// raw malformed requests are refused; every answer carries the strict
// headers; and the server keeps answering afterwards.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "hostile_traffic.h"
#include "test_support.h"
#include "ui_fixture.h"

namespace pgfleet::testing {
namespace {

using nlohmann::json;

// The status line's code of a raw request's answer (0: none).
int RawStatus(int port, const std::string& request) {
  int fd = ConnectLoopback(port);
  if (fd < 0) return 0;
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0 && got.find("\r\n") == std::string::npos)
    got.append(buf, static_cast<size_t>(n));
  close(fd);
  if (got.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::atoi(got.c_str() + 9);
}

class UiHostileTest : public OneHostClusterTest {};

TEST_F(UiHostileTest, BadInputIsRefusedNamingTheRuleAndTheServerStaysUp) {
  UiProcess ui(db_.dsn(), cluster_->dir() + "/ui.log");
  ASSERT_GT(ui.port(), 0) << ui.process().Log();

  struct Case {
    std::string path;
    int status;
    std::string says;  // in the error message
  };
  const std::string huge(100000, 'x');
  const std::vector<Case> cases = {
      {"/api/jobs?state=done", 400, "state must be one of"},
      {"/api/jobs?state=", 200, ""},
      {"/api/jobs?limit=0", 400, "limit must be an integer from 1 to 1000"},
      {"/api/jobs?limit=1001", 400, "limit must be"},
      {"/api/jobs?limit=-5", 400, "limit must be"},
      {"/api/jobs?limit=99999999999999999999999", 400, "limit must be"},
      {"/api/jobs?limit=ten", 400, "limit must be"},
      {"/api/jobs?formation=" + std::string(201, 'f'), 400, "formation must be at most 200 bytes"},
      {"/api/jobs?owner=a%00b", 400, "owner must hold no control characters"},
      {"/api/jobs?host=h1&host=h2", 400, "host given more than once"},
      {"/api/jobs?color=red", 400, "unknown parameter"},
      {"/api/jobs?formation=%27%3B%20drop%20table%20pgfleet.jobs%3B--", 200, ""},
      {"/api/summary?x=1", 400, "unknown parameter"},
      {"/api/jobs/abc", 400, "job id must be a positive integer"},
      {"/api/jobs/0", 400, "job id"},
      {"/api/jobs/-1", 400, "job id"},
      {"/api/jobs/99999999999999999999999999", 400, "job id"},
      {"/api/jobs/1.5", 400, "job id"},
      {"/api/jobs/123456789", 404, "no job 123456789"},
      {"/api/jobs/1/log?attempt=0", 400, "attempt must be an integer"},
      {"/api/jobs/1/log?tail=-1", 400, "tail must be"},
      {"/api/jobs/1/log?follow=1", 400, "unknown parameter"},
      {"/api/events?x=1", 400, "takes no parameters"},
      {"/api/nothing", 404, "no such"},
      {"/etc/passwd", 404, "no such"},
      {"/assets/../../etc/passwd", 404, ""},
      {"/assets/..%2F..%2Fetc%2Fpasswd", 404, ""},
      {"/assets/%2e%2e/app.js", 404, ""},
      {"/assets/nope.js", 404, "no such asset"},
      {"/assets/" + std::string(500, 'a'), 404, ""},
      {"/api/jobs?formation=" + huge, 0, ""},  // beyond httplib's URI limit: refused or 400/414
  };
  for (const auto& c : cases) {
    auto res = ui.Client()->Get(c.path.c_str());
    std::string shown = c.path.substr(0, 80);
    if (c.status == 0) {
      EXPECT_TRUE(!res || res->status >= 400) << shown;
      continue;
    }
    ASSERT_TRUE(res) << shown;
    EXPECT_EQ(c.status, res->status) << shown << ": " << res->body;
    EXPECT_NE(std::string::npos, res->body.find(c.says)) << shown << ": " << res->body;
    EXPECT_EQ("nosniff", res->get_header_value("X-Content-Type-Options")) << shown;
    EXPECT_NE(std::string::npos,
              res->get_header_value("Content-Security-Policy").find("default-src 'self'"))
        << shown;
    EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin")) << shown;
    if (res->status != 404 || c.path.rfind("/assets/", 0) != 0) {
      EXPECT_NE(std::string::npos, res->get_header_value("Content-Type").find("application/json"))
          << shown;
    }
  }

  // Read-only: no other method does anything.
  auto c = ui.Client();
  const std::vector<std::function<httplib::Result()>> writes = {
      [&] { return c->Post("/api/jobs", "{}", "application/json"); },
      [&] { return c->Put("/api/jobs/1", "{}", "application/json"); },
      [&] { return c->Delete("/api/jobs/1"); },
      [&] { return c->Patch("/api/jobs/1", "{}", "application/json"); },
      [&] { return c->Options("/"); },
      [&] { return c->Post("/", std::string(100000, 'b'), "text/plain"); },
  };
  for (const auto& write : writes) {
    auto res = write();
    ASSERT_TRUE(res);
    EXPECT_TRUE(res->status == 405 || res->status == 413) << res->status << res->body;
  }
  EXPECT_EQ(405, c->Post("/api/jobs", "{}", "application/json")->status);
  EXPECT_EQ("0", db_.Scalar("select count(*) from pgfleet.jobs"));

  // Raw malformed requests.
  EXPECT_GE(RawStatus(ui.port(), "BREW /api/jobs HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
  EXPECT_GE(RawStatus(ui.port(), "GET " + std::string(20000, '/') + " HTTP/1.1\r\n\r\n"), 400);
  RawStatus(ui.port(), "GET /api/jobs HTTP/1.1\r\nHost: x\r\n" +
                           std::string(100000, 'h') + "\r\n\r\n");
  RawStatus(ui.port(), std::string("\x16\x03\x01\x00\x05hello", 10));  // TLS to plain HTTP

  // Still up, and the page and its assets are served.
  EXPECT_TRUE(ui.process().Running());
  EXPECT_EQ(200, ui.Get("/api/summary").first);
  auto page = ui.Client()->Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(200, page->status);
  EXPECT_NE(std::string::npos, page->get_header_value("Content-Type").find("text/html"));
  EXPECT_NE(std::string::npos, page->body.find("/assets/app.js"));
  EXPECT_EQ(std::string::npos, page->body.find("http://")) << "the page loads nothing from elsewhere";
  auto js = ui.Client()->Get("/assets/app.js");
  ASSERT_TRUE(js);
  EXPECT_NE(std::string::npos, js->get_header_value("Content-Type").find("javascript"));
  EXPECT_EQ(std::string::npos, js->body.find("innerHTML")) << "data reaches the page as text only";
}

TEST_F(UiHostileTest, BadFlagsAndABadLoginFailAtStart) {
  for (const auto& listen : {"7780", "host:", "127.0.0.1:99999", "127.0.0.1:-1", ":80"}) {
    auto r = pgfleet::testing::Run({BinaryPath("pgfleet"), "ui", "--listen", listen, "--db", db_.dsn()});
    EXPECT_EQ(2, r.exit_code) << listen << r.err;
    EXPECT_NE(std::string::npos, r.err.find("--listen must be HOST:PORT")) << r.err;
  }
  auto streams = pgfleet::testing::Run({BinaryPath("pgfleet"), "ui", "--max-streams", "0", "--db", db_.dsn()});
  EXPECT_EQ(2, streams.exit_code);
  EXPECT_NE(std::string::npos, streams.err.find("--max-streams must be from 1 to 1000"));
  auto login = pgfleet::testing::Run({BinaryPath("pgfleet"), "ui", "--listen", "127.0.0.1:0", "--db",
                    db_.DsnAs("no_such_login_here")});
  EXPECT_EQ(1, login.exit_code) << login.err;
  EXPECT_NE(std::string::npos, login.err.find("cannot connect")) << login.err;
}

}  // namespace
}  // namespace pgfleet::testing
