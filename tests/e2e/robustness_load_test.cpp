// Robustness of hostd under hostile load (issue 14): slow senders, hostile
// traffic against every host while jobs arrive, many readers of a huge log.
// The API stays responsive, no job waits past the host TTL, and hostd's
// memory does not grow with a log's size. Real daemons, real PostgreSQL.

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/net/http.h"
#include "core/util/text.h"
#include "hostile_traffic.h"
#include "robustness_fixture.h"

namespace pgfleet::testing::robustness {
namespace {

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

}  // namespace
}  // namespace pgfleet::testing::robustness
