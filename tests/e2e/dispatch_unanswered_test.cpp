// A dispatch that reaches a host but gets no answer in time (an overloaded
// host: CI found 16 of 2,000 jobs placed a second time this way) must not be
// placed again: the host may start it yet. The jobs stay assigned, run once
// as attempt 1, and the host is suspended. A real hostd sits behind a "mute"
// proxy in this test: the proxy passes each request on late (or swallows it)
// and never answers the scheduler, whose timeout fires first.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <mutex>
#include <thread>

#include "hostile_traffic.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

// Reads one HTTP request (headers and Content-Length body) from fd; "" if the
// peer closed first.
std::string ReadRequest(int fd) {
  std::string in;
  char buf[8192];
  size_t need = std::string::npos;
  while (need == std::string::npos || in.size() < need) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return "";
    in.append(buf, static_cast<size_t>(n));
    size_t end = in.find("\r\n\r\n");
    if (need == std::string::npos && end != std::string::npos) {
      size_t body = 0, at = in.find("Content-Length: ");
      if (at != std::string::npos && at < end) body = std::stoul(in.substr(at + 16));
      need = end + 4 + body;
    }
  }
  return in;
}

// Listens on loopback; every request it reads is passed on to hostd after
// `delay` (or, when forward_port is 0, dropped), and the answer never goes
// back. A connection stays open, silent, until its client gives up.
class MuteProxy {
 public:
  MuteProxy(int forward_port, std::chrono::milliseconds delay)
      : forward_port_(forward_port), delay_(delay) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listener_, 64) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("mute proxy: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~MuteProxy() {
    stop_ = true;
    shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : clients_) shutdown(fd, SHUT_RDWR);
    for (auto& t : handlers_) t.join();
    for (int fd : clients_) close(fd);
    close(listener_);
  }
  int port() const { return port_; }
  int job_requests() const { return job_requests_; }

 private:
  void Accept() {
    while (!stop_) {
      int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      std::lock_guard<std::mutex> lock(mu_);
      clients_.push_back(fd);
      handlers_.emplace_back([this, fd] { Serve(fd); });
    }
  }
  void Serve(int fd) {
    for (std::string request; !(request = ReadRequest(fd)).empty();) {
      if (request.rfind("POST /v1/jobs ", 0) == 0) ++job_requests_;
      if (forward_port_ == 0) continue;
      std::this_thread::sleep_for(delay_);
      int up = ConnectLoopback(forward_port_, 30);
      if (up < 0) continue;
      send(up, request.data(), request.size(), MSG_NOSIGNAL);
      char buf[4096];
      recv(up, buf, sizeof(buf), 0);  // hostd has handled it; drop the answer
      close(up);
    }
  }

  const int forward_port_;
  const std::chrono::milliseconds delay_;
  int listener_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> job_requests_{0};
  std::mutex mu_;
  std::vector<int> clients_;
  std::vector<std::thread> handlers_;
  std::thread acceptor_;
};

class DispatchUnansweredTest : public ::testing::Test {
 protected:
  void SetUp() override { cluster_ = std::make_unique<Cluster>(db_); }
  void StartHost(std::vector<std::string> extra) {
    host_ = &cluster_->StartHost("h1", 4000, 4000, std::move(extra));
    ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  }
  int HostPort() { return PortOf(db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'")); }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs();
  }

  // Points h1's advertised API at the proxy, starts a scheduler, and runs
  // `jobs` jobs; each must run once, as attempt 1, never requeued.
  void RunJobsThrough(MuteProxy& proxy, int jobs) {
    db_.Scalar("update pgfleet.hosts set api_url = 'http://127.0.0.1:" +
               std::to_string(proxy.port()) + "' where id = 'h1'");
    scheduler_ = &cluster_->StartScheduler("s1");
    db_.Scalar(
        "insert into pgfleet.jobs (formation, command, cpu, memory) select 'mute', "
        "array['true'], 10, 10 from generate_series(1, " +
        std::to_string(jobs) + ")");
    ASSERT_TRUE(WaitFor(
        [&] {
          return db_.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == jobs;
        },
        60s))
        << db_.Scalar(
               "select string_agg(state || ':' || n, ', ') from (select state, count(*) n"
               " from pgfleet.jobs group by 1) x");
    EXPECT_GE(proxy.job_requests(), 1);
    EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs where attempt <> 1"));
    EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_events where kind = 'requeued'"));
    EXPECT_EQ(jobs, db_.Count("select count(*) from pgfleet.job_events where kind = 'running'"));
    EXPECT_EQ(0, db_.AttemptsWithRepeated("running"));
    EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.allocation_drift"));
    // The scheduler saw no answer and said so; the host was suspended.
    EXPECT_TRUE(WaitFor(
        [&] { return scheduler_->Log().find("dispatch unanswered") != std::string::npos; }, 10s))
        << scheduler_->Log();
    EXPECT_GE(db_.Count("select suspensions from pgfleet.hosts where id = 'h1'"), 1);
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  Process* host_ = nullptr;
  Process* scheduler_ = nullptr;
};

// The request reaches hostd 4 s late, after the scheduler's 3 s timeout: a
// scheduler that requeued then (as it did) had the jobs run again as
// attempt 2 while hostd started attempt 1.
TEST_F(DispatchUnansweredTest, JobsWhoseDispatchArrivesAfterTheTimeoutRunOnceAsAttemptOne) {
  // (The reconcile, which would start them too, is kept out of the way.)
  ASSERT_NO_FATAL_FAILURE(StartHost({"--reconcile-interval", "30s"}));
  MuteProxy proxy(HostPort(), 4s);
  RunJobsThrough(proxy, 40);
}

// The scheduler does not wait for one host's answer before placing the next
// jobs: a host that never answers holds up its own dispatch (3 s, the
// timeout), not the rest of the cluster. A job for another host, inserted
// while that dispatch waits, runs before the scheduler gives up on it (which
// it records by suspending the silent host). When each pass waited for its
// hosts to answer, the second job was not even placed until then.
TEST_F(DispatchUnansweredTest, AHostThatDoesNotAnswerHoldsUpOnlyItsOwnJobs) {
  ASSERT_NO_FATAL_FAILURE(StartHost({"--label", "zone=mute"}));
  cluster_->StartHost("h2", 4000, 4000, {"--label", "zone=live"});
  ASSERT_TRUE(cluster_->WaitHostsUp(2)) << cluster_->Logs();
  MuteProxy proxy(0, 0ms);  // h1's requests are swallowed
  db_.Scalar("update pgfleet.hosts set api_url = 'http://127.0.0.1:" +
             std::to_string(proxy.port()) + "' where id = 'h1'");
  scheduler_ = &cluster_->StartScheduler("s1");
  db_.Scalar(
      "insert into pgfleet.jobs (formation, command, constraints) values "
      "('mute', array['sleep', '30'], '{\"zone\": \"mute\"}')");
  ASSERT_TRUE(WaitFor([&] { return proxy.job_requests() >= 1; }, 20s)) << cluster_->Logs();
  db_.Scalar(
      "insert into pgfleet.jobs (formation, command, constraints) values "
      "('live', array['true'], '{\"zone\": \"live\"}')");
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_.Count(
                   "select count(*) from pgfleet.jobs where formation = 'live'"
                   " and state = 'succeeded'") == 1;
      },
      20s))
      << cluster_->Logs();
  std::cout << "insert->running of the job for the host that answers, ms: "
            << db_.Scalar(
                   "select round(extract(epoch from started_at - created_at) * 1000)"
                   " from pgfleet.jobs where formation = 'live'")
            << "\n";
  // h1's dispatch was still waiting: not yet given up on, not suspended.
  EXPECT_EQ(0, db_.Count("select suspensions from pgfleet.hosts where id = 'h1'"));
  EXPECT_EQ(std::string::npos, scheduler_->Log().find("dispatch unanswered")) << scheduler_->Log();
  // Then the timeout: h1 suspended, its job left to it (it may have started:
  // h1's reconcile starts it), never placed again.
  EXPECT_TRUE(WaitFor(
      [&] { return db_.Count("select suspensions from pgfleet.hosts where id = 'h1'") >= 1; }, 20s))
      << scheduler_->Log();
  EXPECT_EQ(1, db_.Count("select count(*) from pgfleet.jobs where formation = 'mute'"
                         " and state in ('assigned', 'running') and attempt = 1"));
}

TEST_F(DispatchUnansweredTest, JobsWhoseRequestWasSwallowedAreStartedByTheHostsReconcile) {
  ASSERT_NO_FATAL_FAILURE(StartHost({}));  // reconciles every second
  MuteProxy proxy(0, 0ms);
  RunJobsThrough(proxy, 40);
  EXPECT_NE(std::string::npos, host_->Log().find("started by reconcile")) << host_->Log();
}

}  // namespace
}  // namespace pgfleet::testing
