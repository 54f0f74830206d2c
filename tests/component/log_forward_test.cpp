// Forwarding job output (hostd/output/log_forward.h) without daemons: the flag's
// grammar, the RFC 5424 text, lines cut as promised, and a receiver that
// falls behind losing forwarded lines (counted and told) but never blocking
// the writer. The whole path through hostd is in e2e/log_forward_e2e_test.

#include "hostd/output/log_forward.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pgfleet::hostd {
namespace {

using namespace std::chrono_literals;

TEST(LogForwardFlag, AcceptsJournaldAndSyslogAddresses) {
  EXPECT_EQ(LogForwardTarget::Kind::kNone, ParseLogForward("").kind);
  EXPECT_EQ(LogForwardTarget::Kind::kJournald, ParseLogForward("journald").kind);
  auto t = ParseLogForward("syslog://127.0.0.1:5514");
  EXPECT_EQ(LogForwardTarget::Kind::kSyslog, t.kind);
  EXPECT_EQ("127.0.0.1", t.host);
  EXPECT_EQ(5514, t.port);
  t = ParseLogForward("syslog://logs.example-corp.net:514");
  EXPECT_EQ("logs.example-corp.net", t.host);
  t = ParseLogForward("syslog://[::1]:514");
  EXPECT_EQ("::1", t.host);
  EXPECT_EQ(514, t.port);
}

TEST(LogForwardFlag, RefusesWhatItCannotUseNamingTheFlagAndTheRule) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"journal", "must be journald or syslog://HOST:PORT"},
      {"syslog:127.0.0.1:514", "must be journald or syslog://HOST:PORT"},
      {"tcp://127.0.0.1:514", "must be journald or syslog://HOST:PORT"},
      {"syslog://127.0.0.1", "needs a port"},
      {"syslog://:514", "needs a host"},
      {"syslog://127.0.0.1:0", "port must be a number from 1 to 65535"},
      {"syslog://127.0.0.1:65536", "port must be a number from 1 to 65535"},
      {"syslog://127.0.0.1:5x4", "port must be a number from 1 to 65535"},
      {"syslog://127.0.0.1:", "port must be a number from 1 to 65535"},
      {"syslog://a b:514", "host may hold only"},
      {"syslog://[::1:514", "IPv6"},
  };
  for (const auto& [value, rule] : cases) {
    try {
      ParseLogForward(value);
      ADD_FAILURE() << value << " was accepted";
    } catch (const std::invalid_argument& e) {
      std::string what = e.what();
      EXPECT_NE(std::string::npos, what.find("--log-forward")) << what;
      EXPECT_NE(std::string::npos, what.find(rule)) << value << ": " << what;
      EXPECT_NE(std::string::npos, what.find(value)) << what;
    }
  }
}

TEST(SyslogMessage, IsRfc5424WithTheJobAsStructuredData) {
  LineOrigin o{42, 3, "web \"blue\"]", "h1"};
  // 2026-11-25T10:20:30.000042Z
  std::string m = SyslogMessage(o, "box 1", "hello world", 1795602030000042);
  EXPECT_EQ(
      "<14>1 2026-11-25T10:20:30.000042Z box_1 pgfleet-job - - [pgfleet@32473 job=\"42\" "
      "attempt=\"3\" formation=\"web \\\"blue\\\"\\]\" host=\"h1\"] hello world",
      m);
  EXPECT_NE(std::string::npos, SyslogMessage(o, "", "", 0).find(" - pgfleet-job "));
}

// Records what it is sent; while `hold` is set, each send waits for it to clear.
class RecordingSink : public LineSink {
 public:
  struct Shared {
    std::mutex mu;
    std::vector<std::string> lines;
    std::atomic<bool> hold{false};
  };
  explicit RecordingSink(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
  bool Send(std::string_view line) override {
    while (s_->hold) std::this_thread::sleep_for(1ms);
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->lines.emplace_back(line);
    return true;
  }

 private:
  std::shared_ptr<Shared> s_;
};

TEST(LineForwarder, SendsEachLineWithoutItsNewlineAcrossWritesAndTheLastUnterminatedOne) {
  auto shared = std::make_shared<RecordingSink::Shared>();
  LineForwarder f(std::make_unique<RecordingSink>(shared));
  for (std::string piece : {"first li", "ne\nsecond\n\nthi", "rd\nno newline"}) {
    f.Feed(piece.data(), piece.size());
  }
  f.Finish(5s);
  std::lock_guard<std::mutex> lock(shared->mu);
  EXPECT_EQ((std::vector<std::string>{"first line", "second", "", "third", "no newline"}),
            shared->lines);
  EXPECT_EQ(5u, f.sent());
  EXPECT_EQ(0u, f.dropped());
}

TEST(LineForwarder, CutsALineLongerThanOneMessageIntoPiecesInOrder) {
  auto shared = std::make_shared<RecordingSink::Shared>();
  LineForwarder f(std::make_unique<RecordingSink>(shared));
  std::string line(kMaxForwardedLine * 2 + 10, 'x');
  for (size_t i = 0; i < line.size(); ++i) line[i] = static_cast<char>('a' + i % 26);
  std::string out = line + "\nnext\n";
  f.Feed(out.data(), 100);  // in two writes, the cut falling anywhere
  f.Feed(out.data() + 100, out.size() - 100);
  f.Finish(5s);
  std::lock_guard<std::mutex> lock(shared->mu);
  ASSERT_EQ(4u, shared->lines.size());
  EXPECT_EQ(line.substr(0, kMaxForwardedLine), shared->lines[0]);
  EXPECT_EQ(line.substr(kMaxForwardedLine, kMaxForwardedLine), shared->lines[1]);
  EXPECT_EQ(line.substr(2 * kMaxForwardedLine), shared->lines[2]);
  EXPECT_EQ("next", shared->lines[3]);
}

TEST(LineForwarder, AStuckReceiverNeverBlocksTheWriterAndItsLostLinesAreCountedAndTold) {
  auto shared = std::make_shared<RecordingSink::Shared>();
  shared->hold = true;  // the receiver takes nothing
  LineForwarder f(std::make_unique<RecordingSink>(shared));
  std::string line(1000, 'y');
  line += '\n';
  const int n = static_cast<int>(2 * kForwardQueueBytes / line.size());
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) f.Feed(line.data(), line.size());
  // Twice what the queue holds went in without waiting for the receiver.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_GT(f.dropped(), static_cast<uint64_t>(n / 3));
  shared->hold = false;  // the receiver catches up
  std::string last = "after\n";
  // Wait until the queue drained, then one more line: it follows the notice.
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (f.sent() + f.dropped() < static_cast<uint64_t>(n) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  f.Feed(last.data(), last.size());
  f.Finish(10s);
  std::lock_guard<std::mutex> lock(shared->mu);
  ASSERT_GE(shared->lines.size(), 2u);
  EXPECT_EQ("after", shared->lines.back());
  const std::string& notice = shared->lines[shared->lines.size() - 2];
  EXPECT_NE(std::string::npos, notice.find("lines of output were not forwarded")) << notice;
  EXPECT_EQ(static_cast<uint64_t>(n) + 1, f.sent() + f.dropped());
}

}  // namespace
}  // namespace pgfleet::hostd
