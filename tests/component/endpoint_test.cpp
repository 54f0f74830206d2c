// net::MakeEndpoint: a host's API base URL, with or without a path prefix.

#include "core/net/endpoint.h"

#include <gtest/gtest.h>

#include <thread>

namespace pgfleet::testing {
namespace {

// A server on a free loopback port answering GET <path> with the path and the token seen.
class EchoServer {
 public:
  explicit EchoServer(const std::string& path) {
    server_.Get(path, [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.path + " " + req.get_header_value("Authorization"), "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~EchoServer() {
    server_.stop();
    thread_.join();
  }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(EndpointTest, PlainHostPortHasNoPrefix) {
  EchoServer server("/v1/jobs");
  for (const std::string& url : {server.base(), server.base() + "/"}) {
    auto ep = net::MakeEndpoint(url, "secret");
    EXPECT_EQ(ep.prefix, "");
    auto res = ep.client->Get(ep.prefix + "/v1/jobs");
    ASSERT_TRUE(res) << url;
    EXPECT_EQ(res->body, "/v1/jobs Bearer secret");
  }
}

TEST(EndpointTest, PathBecomesThePrefixWithoutTrailingSlash) {
  EchoServer server("/hosts/sim-1/v1/jobs");
  for (const std::string& url : {server.base() + "/hosts/sim-1", server.base() + "/hosts/sim-1/"}) {
    auto ep = net::MakeEndpoint(url, "secret");
    EXPECT_EQ(ep.prefix, "/hosts/sim-1");
    auto res = ep.client->Get(ep.prefix + "/v1/jobs");
    ASSERT_TRUE(res) << url;
    EXPECT_EQ(res->body, "/hosts/sim-1/v1/jobs Bearer secret");
  }
  EXPECT_EQ(net::MakeEndpoint("http://localhost/a/b/", "t").prefix, "/a/b");
}

TEST(EndpointTest, OtherUrlsAreRejectedNamingTheUrl) {
  // (https://h:1 is a URL: hosts may serve TLS, tests/e2e/tls_test.cpp.)
  for (std::string bad : {"ftp://h:1", "h:1", "http://", "https://", "http://h:x", "http://h:1/p?q=1",
                          "http://h:1/p#f", "http://h :1", ""}) {
    try {
      net::MakeEndpoint(bad, "t");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("\"" + bad + "\""), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace pgfleet::testing
