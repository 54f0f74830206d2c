// Stops go to hosts off the scheduler's loop (issue 34): 100 stops for a host
// that accepts connections but never answers must not delay a job placed on
// another host by more than the usual pass. Before, the loop posted them one
// after another, 3 s each, while nothing else was placed.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A loopback listener that accepts connections and never answers.
class SilentServer {
 public:
  SilentServer() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd_, 256);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (!done_) {
        int c = accept(fd_, nullptr, nullptr);
        if (c >= 0) {
          held_.push_back(c);  // read nothing, answer nothing
          ++accepted_;
        }
      }
    });
  }
  ~SilentServer() {
    done_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
    for (int c : held_) close(c);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> done_{false};
  std::atomic<int> accepted_{0};
  std::vector<int> held_;
  std::thread thread_;
};

class StopForwardTest : public OneHostClusterTest {};

TEST_F(StopForwardTest, StopsToASilentHostDoNotDelayJobsElsewhere) {
  SilentServer silent;
  db_.Scalar("select pgfleet.register_host('mute', 'http://127.0.0.1:" +
             std::to_string(silent.port()) + "', 100000, 100000, '{}', 'process', null)");
  // 100 jobs assigned to it (no scheduler looks at them: they wait for a
  // not_before an hour away, and no host matches their constraint), then
  // cancelled: the database wants each stopped there.
  db_.Scalar(
      "insert into pgfleet.jobs (command, constraints, not_before)"
      " select '{sleep,600}', '{\"zone\": \"nowhere\"}', now() + interval '1 hour'"
      " from generate_series(1, 100); select 1");
  db_.Scalar(
      "select count(*) from pgfleet.assign_jobs((select jsonb_agg(jsonb_build_object("
      "'job', id, 'host', 'mute')) from pgfleet.jobs))");
  db_.Scalar("update pgfleet.host_heartbeats set last_seen = now() + interval '1 hour' where host_id = 'mute'");
  db_.Scalar("select pgfleet.set_host_state('mute', 'draining')");  // no new work for it
  db_.Scalar("select count(pgfleet.cancel(id)) from pgfleet.jobs");
  ASSERT_EQ(100, db_.Count("select count(*) from pgfleet.jobs where desired_state = 'stop'"
                           " and state = 'assigned' and host_id = 'mute'"));
  // The scheduler is now forwarding them (to a host that never answers).
  ASSERT_TRUE(WaitFor([&] { return silent.accepted() > 0; }, 10s));

  auto start = Clock::now();
  auto run = cluster_->Cli({"run", "--", "true"});
  ASSERT_EQ(0, run.exit_code) << run.err;
  std::string id = util::Trim(run.out);
  EXPECT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "succeeded"; },
      15s))
      << db_.Scalar("select state || ' ' || coalesce(error, '') from pgfleet.jobs where id = " + id);
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << "stop forwarding: job elsewhere succeeded in " << seconds << " s with 100 stops to a silent host\n";
  // Each stop is sent again only after a backoff, not on every pass.
  std::this_thread::sleep_for(3s);
  EXPECT_LE(silent.accepted(), 40) << "stops resent on every pass";
}

}  // namespace
}  // namespace pgfleet::testing
