// Forwarding (host disk and insight issue, item 6): hostd --log-forward sends
// each line of a job's output, with its job id, attempt, formation and host,
// to a syslog server (RFC 5424 over UDP) or to journald, while the job's
// output files and `pgfleet logs` keep everything as before. The receivers
// are the test's own sockets: a UDP socket on loopback, and a journal socket
// that a private mount namespace puts where libsystemd looks for journald's.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

// Datagrams that arrive at fd within `timeout`, until `done` says enough.
template <typename Done>
std::vector<std::string> Receive(int fd, std::chrono::milliseconds timeout, Done done) {
  std::vector<std::string> got;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done(got) && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[65536];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n > 0) got.emplace_back(buf, static_cast<size_t>(n));
  }
  return got;
}

// A UDP socket on a free loopback port; *port set to it.
int BindLoopbackUdp(int* port) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

// The job of both tests: three lines, then one without a newline.
const char* kJob = "{sh,-c,for i in 1 2 3; do echo line $i; done; printf last}";

class LogForwardE2eTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && cluster_) std::cerr << cluster_->Logs();
    cluster_.reset();
    if (fd_ >= 0) close(fd_);
  }
  std::string Submit() {
    return db_.Scalar(std::string("insert into pgfleet.jobs (command, formation, cpu, memory) "
                                  "values ('") +
                      kJob + "', 'billing', 100, 32) returning id");
  }
  // The job's retained output through the CLI, once it has succeeded.
  void ExpectSucceededWithAllItsOutput(const std::string& id) {
    ASSERT_TRUE(WaitFor(
        [&] {
          return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "succeeded";
        },
        60s));
    CommandResult logs = cluster_->Cli({"logs", id});
    ASSERT_EQ(0, logs.exit_code) << logs.err;
    EXPECT_EQ("line 1\nline 2\nline 3\nlast", logs.out);
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  int fd_ = -1;
};

TEST_F(LogForwardE2eTest, EachLineReachesASyslogServerAsRfc5424WithTheJobsFields) {
  int port = 0;
  fd_ = BindLoopbackUdp(&port);
  ASSERT_GE(fd_, 0) << strerror(errno);
  std::string target = "syslog://127.0.0.1:" + std::to_string(port);

  cluster_ = std::make_unique<Cluster>(db_);
  cluster_->StartScheduler("s1");
  cluster_->StartHost("h1", 2000, 2000, {"--log-forward", target});
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  std::string id = Submit();

  auto got =
      Receive(fd_, Slowed(30s), [](const std::vector<std::string>& g) { return g.size() >= 4; });
  ASSERT_EQ(4u, got.size());
  const std::string sd =
      "[pgfleet@32473 job=\"" + id + "\" attempt=\"1\" formation=\"billing\" host=\"h1\"] ";
  const std::vector<std::string> lines = {"line 1", "line 2", "line 3", "last"};
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(0u, got[i].rfind("<14>1 ", 0)) << got[i];  // user.info, version 1
    EXPECT_NE(std::string::npos, got[i].find(" pgfleet-job - - ")) << got[i];
    size_t at = got[i].find(sd);
    ASSERT_NE(std::string::npos, at) << got[i];
    EXPECT_EQ(lines[i], got[i].substr(at + sd.size())) << got[i];
  }
  ExpectSucceededWithAllItsOutput(id);
}

// Fields of one journal native protocol datagram (KEY=VALUE lines, or KEY,
// a 64-bit little-endian length and the value for values with newlines).
std::map<std::string, std::string> JournalFields(const std::string& d) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  while (i < d.size()) {
    size_t nl = d.find('\n', i);
    if (nl == std::string::npos) break;
    std::string head = d.substr(i, nl - i);
    size_t eq = head.find('=');
    if (eq != std::string::npos) {
      out[head.substr(0, eq)] = head.substr(eq + 1);
      i = nl + 1;
      continue;
    }
    uint64_t n = 0;
    if (nl + 9 > d.size()) break;
    std::memcpy(&n, d.data() + nl + 1, 8);
    out[head] = d.substr(nl + 9, n);
    i = nl + 9 + n + 1;
  }
  return out;
}

TEST_F(LogForwardE2eTest, EachLineReachesJournaldWithTheJobsFields) {
  cluster_ = std::make_unique<Cluster>(db_);
  std::string journal = cluster_->dir() + "/journal";
  ASSERT_EQ(0, mkdir(journal.c_str(), 0755));
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string path = journal + "/socket";
  ASSERT_LT(path.size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, path.c_str());
  ASSERT_EQ(0, bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr)) << strerror(errno);

  // hostd (and the shims it starts) see the test's directory where
  // journald's socket lives, in a mount namespace of their own; nothing
  // changes for the rest of the machine.
  std::vector<std::string> wrapper = {
      "/usr/bin/unshare",
      "--mount",
      "--propagation",
      "private",
      "--",
      "/bin/sh",
      "-c",
      "mkdir -p /run/systemd && mount -t tmpfs pgfleet-test /run/systemd && "
      "mkdir /run/systemd/journal && mount --bind \"$0\" /run/systemd/journal && exec \"$@\"",
      journal};
  cluster_->StartScheduler("s1");
  cluster_->StartHost("h1", 2000, 2000, {"--log-forward", "journald"}, wrapper);
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  std::string id = Submit();

  auto got =
      Receive(fd_, Slowed(30s), [](const std::vector<std::string>& g) { return g.size() >= 4; });
  ASSERT_EQ(4u, got.size());
  const std::vector<std::string> lines = {"line 1", "line 2", "line 3", "last"};
  for (size_t i = 0; i < lines.size(); ++i) {
    auto f = JournalFields(got[i]);
    EXPECT_EQ(lines[i], f["MESSAGE"]) << got[i];
    EXPECT_EQ(id, f["PGFLEET_JOB_ID"]);
    EXPECT_EQ("1", f["PGFLEET_ATTEMPT"]);
    EXPECT_EQ("billing", f["PGFLEET_FORMATION"]);
    EXPECT_EQ("h1", f["PGFLEET_HOST_ID"]);
    EXPECT_EQ("pgfleet-job", f["SYSLOG_IDENTIFIER"]);
    EXPECT_EQ("6", f["PRIORITY"]);
  }
  ExpectSucceededWithAllItsOutput(id);
}

TEST_F(LogForwardE2eTest, WithNoReceiverTheJobRunsAndKeepsItsOutput) {
  // A syslog port nobody listens on: datagrams are refused, nothing else changes.
  int port = 0;
  fd_ = BindLoopbackUdp(&port);
  ASSERT_GE(fd_, 0) << strerror(errno);
  close(fd_);  // the port is free again: nobody listens
  fd_ = -1;
  cluster_ = std::make_unique<Cluster>(db_);
  cluster_->StartScheduler("s1");
  cluster_->StartHost("h1", 2000, 2000,
                      {"--log-forward", "syslog://127.0.0.1:" + std::to_string(port)});
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  ExpectSucceededWithAllItsOutput(Submit());
}

}  // namespace
}  // namespace pgfleet::testing
