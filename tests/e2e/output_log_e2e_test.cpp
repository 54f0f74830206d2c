// Job output rotated and capped on the host (host disk issue, item 1): a job
// that writes 200 MB never holds more than log_max_files x log_max_file_mb
// on disk, `pgfleet logs` prints what is kept in order to the last line, and
// `logs -f` follows across rotations.

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <map>
#include <sstream>
#include <thread>

#include "core/net/http.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

// Bytes the directory's files hold on disk: each file once, however many
// names it has (a rotation links the full file under its new name before the
// old name is given to a fresh file).
uint64_t BytesIn(const std::string& dir) {
  std::map<ino_t, uint64_t> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    struct stat st {};
    if (lstat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      files[st.st_ino] = static_cast<uint64_t>(st.st_size);
    }
  }
  uint64_t total = 0;
  for (const auto& [ino, size] : files) total += size;
  return total;
}

class OutputLogE2eTest : public OneHostClusterTest {
 protected:
  // Inserts a job running `script` under sh; returns its id.
  std::string Submit(const std::string& script, const std::string& limits_columns = "",
                     const std::string& limits_values = "") {
    return db_.Scalar("insert into pgfleet.jobs (command, cpu, memory" + limits_columns +
                      ") values (array['sh', '-c', $$" + script + "$$], 100, 64" + limits_values +
                      ") returning id");
  }
  bool WaitState(const std::string& id, const std::string& state, std::chrono::seconds timeout) {
    return WaitFor(
        [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == state; },
        timeout);
  }
};

TEST_F(OutputLogE2eTest, TwoHundredMegabytesKeepTheCapOnDiskAndLogsEndWithTheLastLine) {
  // 200 MB of numbered lines, then a last line; defaults: 5 files x 20 MiB.
  std::string id = Submit(
      "line=$(printf '%0100d' 0); "
      "yes \"$line\" | head -c 200000000; echo; echo LAST-LINE");
  const std::string dir = cluster_->dir() + "/h1/jobs/" + id + "-1";
  const uint64_t cap = 5ull * 20 * 1024 * 1024;
  uint64_t most = 0;
  bool ended = false;
  auto deadline = std::chrono::steady_clock::now() + 120s;
  while (!ended && std::chrono::steady_clock::now() < deadline) {
    most = std::max(most, BytesIn(dir));
    ended = db_.Scalar("select state from pgfleet.jobs where id = " + id) == "succeeded";
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(ended) << db_.Scalar(
      "select state || ' ' || coalesce(error, '') from pgfleet.jobs "
      "where id = " +
      id);
  most = std::max(most, BytesIn(dir));
  // The cap, plus the small files beside the output (state.jsonl).
  EXPECT_LE(most, cap + 64 * 1024) << "attempt directory peaked at " << most << " bytes";
  EXPECT_GT(most, cap / 2);

  auto logs = cluster_->Cli({"logs", id}, 120s);
  ASSERT_EQ(0, logs.exit_code) << logs.err;
  EXPECT_LE(logs.out.size(), cap);
  EXPECT_GT(logs.out.size(), cap - 20 * 1024 * 1024);
  const std::string last = "\nLAST-LINE\n";
  ASSERT_GE(logs.out.size(), last.size());
  EXPECT_EQ(last, logs.out.substr(logs.out.size() - last.size()));
  // In order: every whole line between the first and the end is the same line.
  const std::string line = std::string(100, '0');
  size_t first_nl = logs.out.find('\n');
  size_t bad = 0, lines = 0;
  std::istringstream in(logs.out.substr(first_nl + 1));
  for (std::string l; std::getline(in, l);) {
    ++lines;
    if (l != line && l != "LAST-LINE" && line.rfind(l, 0) != 0) ++bad;
  }
  EXPECT_EQ(0u, bad);
  EXPECT_GT(lines, 500000u);

  auto tail = cluster_->Cli({"logs", id, "--tail", "2"});
  ASSERT_EQ(0, tail.exit_code) << tail.err;
  ASSERT_GE(tail.out.size(), last.size());
  EXPECT_EQ(last, tail.out.substr(tail.out.size() - last.size())) << tail.out;
  EXPECT_EQ(2, std::count(tail.out.begin(), tail.out.end(), '\n')) << tail.out;
  // The database's tail ends with the last line too.
  std::string stored = db_.Scalar("select output_tail from pgfleet.jobs where id = " + id);
  ASSERT_GE(stored.size(), last.size());
  EXPECT_EQ(last, stored.substr(stored.size() - last.size()));
}

TEST_F(OutputLogE2eTest, FollowingAJobReadsEveryLineAcrossRotations) {
  // ~23 MB of numbered lines, 1 MiB files, enough files to keep them all:
  // a follower must get every line once, in order, across ~22 rotations.
  std::string id = Submit("sleep 1; seq 1 3000000", ", log_max_files, log_max_file_mb", ", 60, 1");
  ASSERT_TRUE(WaitState(id, "running", 20s));
  auto followed = cluster_->Cli({"logs", id, "-f"}, 120s);
  ASSERT_EQ(0, followed.exit_code) << followed.err;
  std::istringstream in(followed.out);
  long expect = 1, bad = 0;
  for (std::string l; std::getline(in, l); ++expect) {
    if (l != std::to_string(expect)) ++bad;
  }
  EXPECT_EQ(0, bad);
  EXPECT_EQ(3000001, expect);
  // Rotated as asked: files of at most 1 MiB.
  const std::string dir = cluster_->dir() + "/h1/jobs/" + id + "-1";
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("output.log", 0) != 0) continue;
    ++files;
    EXPECT_LE(std::filesystem::file_size(e.path()), 1u << 20) << e.path();
  }
  EXPECT_GE(files, 20);
}

TEST_F(OutputLogE2eTest, LimitsOutOfBoundsAreRefusedNamingTheField) {
  for (auto [column, value, message] :
       {std::tuple{"log_max_files", "1", "log_max_files must be between 2 and 100"},
        std::tuple{"log_max_files", "101", "log_max_files must be between 2 and 100"},
        std::tuple{"log_max_file_mb", "0", "log_max_file_mb must be between 1 and 1024"}}) {
    try {
      Submit("true", std::string(", ") + column, std::string(", ") + value);
      ADD_FAILURE() << column << "=" << value << " was accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find(message)) << e.what();
    }
  }
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs"));
  auto bad_flag = testing::Run({BinaryPath("pgfleet-hostd"), "--db", db_.dsn(), "--id", "hx",
                                "--token-file", cluster_->token_file(), "--log-max-files", "1"});
  EXPECT_EQ(2, bad_flag.exit_code);
  EXPECT_NE(std::string::npos, bad_flag.err.find("--log-max-files must be between 2 and 100"))
      << bad_flag.err;
}

}  // namespace
}  // namespace pgfleet::testing
