// net::ClientPool: keep-alive connections to hosts' APIs, shared per origin
// (hollow hosts behind one listener share them) and bounded per origin.

#include "core/net/client_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

// Answers POST /hosts/<id>/v1/jobs after a short pause, recording which
// client connections (remote ports) it saw and how many requests overlapped.
class CountingServer {
 public:
  CountingServer() {
    server_.new_task_queue = [] { return new httplib::ThreadPool(16); };
    server_.set_keep_alive_max_count(1000);  // as hostd's API (httplib's default: 5)
    server_.Post(
        R"(/hosts/([^/]+)/v1/jobs)", [this](const httplib::Request& req, httplib::Response& res) {
          int now = ++in_flight_;
          int seen = max_in_flight_.load();
          while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
          }
          {
            std::lock_guard<std::mutex> lock(mu_);
            ports_.insert(req.remote_port);
          }
          std::this_thread::sleep_for(10ms);
          --in_flight_;
          res.set_content(std::string(req.matches[1]) + " " + req.get_header_value("Authorization"),
                          "text/plain");
        });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~CountingServer() {
    server_.stop();
    thread_.join();
  }
  std::string host_url(const std::string& id) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/hosts/" + id;
  }
  size_t connections() {
    std::lock_guard<std::mutex> lock(mu_);
    return ports_.size();
  }
  int max_in_flight() const { return max_in_flight_; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::set<int> ports_;
  std::atomic<int> in_flight_{0}, max_in_flight_{0};
};

TEST(ClientPoolTest, SequentialRequestsToHostsBehindOneListenerShareOneConnection) {
  CountingServer server;
  net::ClientPool pool("secret", {});
  for (int i = 0; i < 20; ++i) {
    std::string id = "sim-" + std::to_string(i % 2 + 1);
    auto res = pool.Post(server.host_url(id), "/v1/jobs", "{}", 5);
    ASSERT_TRUE(res) << i;
    EXPECT_EQ(res->body, id + " Bearer secret");
  }
  EXPECT_EQ(server.connections(), 1u);
  EXPECT_EQ(pool.OpenConnections(), 1);
}

TEST(ClientPoolTest, AConnectionTheServerClosesIsNotReused) {
  httplib::Server server;  // httplib's default: "Connection: close" on every 5th answer
  server.Post("/v1/jobs", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread thread([&] { server.listen_after_bind(); });
  net::ClientPool pool("t", {});
  for (int i = 0; i < 12; ++i) {
    auto res = pool.Post("http://127.0.0.1:" + std::to_string(port), "/v1/jobs", "{}", 5);
    ASSERT_TRUE(res) << i;
    EXPECT_EQ(pool.OpenConnections(), (i + 1) % 5 == 0 ? 0 : 1) << i;
  }
  server.stop();
  thread.join();
}

TEST(ClientPoolTest, ConcurrentRequestsAreBoundedPerOrigin) {
  CountingServer server;
  net::ClientPool pool("t", net::ClientPool::Options{3, 2000ms});
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 12; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        if (pool.Post(server.host_url("h" + std::to_string(t)), "/v1/jobs", "{}", 5)) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 36);
  EXPECT_LE(server.max_in_flight(), 3);
  EXPECT_GE(server.max_in_flight(), 2);  // it did run requests side by side
  EXPECT_LE(server.connections(), 3u);
}

TEST(ClientPoolTest, AFailedRequestIsReportedAndItsConnectionNotReused) {
  net::ClientPool pool("t", {});
  // Port 9 on loopback: nothing listens there.
  auto res = pool.Post("http://127.0.0.1:9/hosts/x", "/v1/jobs", "{}", 1);
  EXPECT_FALSE(res);
  EXPECT_EQ(pool.OpenConnections(), 0);
  EXPECT_THROW(pool.Post("ftp://h/x", "/v1/jobs", "{}", 1), std::invalid_argument);
  EXPECT_EQ(pool.OpenConnections(), 0);
}

}  // namespace
}  // namespace pgfleet::testing
