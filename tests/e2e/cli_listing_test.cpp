// Listing with the CLI (the first hour issue, item 9): ps filters by state,
// age, formation and host; every --json is one JSON document (events
// --jsonl keeps one object per line, and follows); inspect leads with state,
// exit and error; events -f keeps its columns aligned across pages.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class CliListingTest : public OneHostClusterTest {
 protected:
  // ids of `pgfleet ps --json ARGS...`, checking the output is one JSON array.
  std::vector<int64_t> PsIds(std::vector<std::string> args) {
    args.insert(args.begin(), "ps");
    args.push_back("--json");
    auto r = cluster_->Cli(args);
    EXPECT_EQ(0, r.exit_code) << r.err;
    std::vector<int64_t> ids;
    json doc = json::parse(r.out, nullptr, false);
    EXPECT_TRUE(doc.is_array()) << r.out;
    if (!doc.is_array()) return ids;
    for (const auto& j : doc) ids.push_back(j["id"].get<int64_t>());
    return ids;
  }
};

TEST_F(CliListingTest, PsFiltersByStateAgeFormationAndHost) {
  auto ok = cluster_->Cli({"run", "--wait", "--", "true"});
  ASSERT_EQ(0, ok.exit_code) << ok.err;
  int64_t succeeded = std::stoll(db_.Scalar("select max(id) from pgfleet.jobs"));
  auto bad = cluster_->Cli({"run", "--wait", "--formation", "nightly", "--", "false"});
  ASSERT_EQ(1, bad.exit_code) << bad.err;
  int64_t failed = std::stoll(db_.Scalar("select max(id) from pgfleet.jobs"));
  // Never placed: no host has that much memory.
  auto big = cluster_->Cli({"run", "--memory", "100000", "--", "true"});
  int64_t pending = std::stoll(util::Trim(big.out));

  EXPECT_EQ(std::vector<int64_t>{succeeded}, PsIds({"--state", "succeeded"}));
  EXPECT_EQ(std::vector<int64_t>{failed}, PsIds({"--state", "failed"}));
  EXPECT_EQ(std::vector<int64_t>{pending}, PsIds({}));  // live jobs only by default
  EXPECT_EQ((std::vector<int64_t>{pending, failed, succeeded}), PsIds({"--all"}));
  EXPECT_EQ(std::vector<int64_t>{failed}, PsIds({"--all", "--formation", "nightly"}));
  EXPECT_EQ((std::vector<int64_t>{failed, succeeded}), PsIds({"--all", "--host", "h1"}));
  EXPECT_EQ((std::vector<int64_t>{pending, failed, succeeded}), PsIds({"--all", "--since", "10m"}));
  db_.Scalar("update pgfleet.jobs set created_at = now() - interval '2 hours' where id = " +
             std::to_string(succeeded));
  EXPECT_EQ((std::vector<int64_t>{pending, failed}), PsIds({"--all", "--since", "1h"}));

  auto bad_state = cluster_->Cli({"ps", "--state", "done"});
  EXPECT_EQ(2, bad_state.exit_code);
  EXPECT_NE(std::string::npos, bad_state.err.find("--state must be")) << bad_state.err;
  auto bad_since = cluster_->Cli({"ps", "--since", "yesterday"});
  EXPECT_EQ(2, bad_since.exit_code);
  EXPECT_NE(std::string::npos, bad_since.err.find("--since")) << bad_since.err;
}

TEST_F(CliListingTest, JsonIsOneDocumentAndInspectLeadsWithTheOutcome) {
  auto r = cluster_->Cli({"run", "--wait", "--", "sh", "-c", "exit 3"});
  ASSERT_EQ(3, r.exit_code) << r.err;
  std::string id = db_.Scalar("select max(id) from pgfleet.jobs");

  for (std::vector<std::string> args : {std::vector<std::string>{"events", "--json"},
                                        {"events", id, "--json"},
                                        {"ps", "--all", "--json"},
                                        {"inspect", id, "--json"},
                                        {"hosts", "--json"},
                                        {"status", "--json"},
                                        {"formation", "list", "--json"}}) {
    auto out = cluster_->Cli(args);
    EXPECT_EQ(0, out.exit_code) << args[0] << ": " << out.err;
    EXPECT_FALSE(json::parse(out.out, nullptr, false).is_discarded())
        << args[0] << " --json is not one JSON document:\n"
        << out.out;
  }
  auto events = json::parse(cluster_->Cli({"events", id, "--json"}).out);
  ASSERT_TRUE(events.is_array());
  EXPECT_GE(events.size(), 3u);  // assigned, running, failed
  auto jsonl = cluster_->Cli({"events", id, "--jsonl"});
  ASSERT_EQ(0, jsonl.exit_code) << jsonl.err;
  auto lines = Lines(jsonl.out);
  EXPECT_EQ(events.size(), lines.size());
  for (const auto& line : lines) EXPECT_TRUE(json::parse(line, nullptr, false).is_object()) << line;
  EXPECT_EQ(2, cluster_->Cli({"events", "-f", "--json"}).exit_code);

  auto inspect = cluster_->Cli({"inspect", id});
  ASSERT_EQ(0, inspect.exit_code) << inspect.err;
  auto head = Lines(inspect.out);
  ASSERT_GE(head.size(), 5u);
  EXPECT_EQ("id: " + id, head[0]);
  EXPECT_EQ("state: failed", head[1]);
  EXPECT_EQ("exit_code: 3", head[2]);
  EXPECT_EQ("signal: null", head[3]);
  EXPECT_EQ("error: exit code 3", head[4]);
}

TEST_F(CliListingTest, EventsFollowKeepsItsColumnsAligned) {
  Process follow({BinaryPath("pgfleet"), "events", "-f"}, cluster_->dir() + "/events-f.log",
                 {"PGFLEET_DB=" + db_.dsn()});
  // Later pages: events of jobs with longer ids, hosts and kinds than the first page had.
  std::this_thread::sleep_for(1s);
  for (int i = 0; i < 3; ++i) {
    auto r = cluster_->Cli({"run", "--wait", "--", "sh", "-c", i == 2 ? "exit 1" : "true"});
    ASSERT_LE(r.exit_code, 1) << r.err;
  }
  ASSERT_TRUE(WaitFor([&] { return follow.Log().find("failed") != std::string::npos; }, 20s))
      << follow.Log();
  follow.Stop();
  auto lines = Lines(follow.Log());
  ASSERT_GE(lines.size(), 8u) << follow.Log();
  ASSERT_EQ(0u, lines[0].find("AT")) << follow.Log();
  // Each column starts where the header's does, on every line.
  for (const char* col : {"JOB", "ATTEMPT", "KIND", "HOST", "DETAIL"}) {
    size_t at = lines[0].find(col);
    ASSERT_NE(std::string::npos, at);
    for (size_t i = 1; i < lines.size(); ++i) {
      ASSERT_GT(lines[i].size(), at - 1) << "line " << i << ":\n" << follow.Log();
      EXPECT_EQ(' ', lines[i][at - 1]) << col << " of line " << i << ":\n" << follow.Log();
      // (A created event has no host, and some events no detail.)
      bool may_be_empty = std::string(col) == "HOST" || std::string(col) == "DETAIL";
      if (!may_be_empty) {
        EXPECT_NE(' ', lines[i][at]) << col << " of line " << i << ":\n" << follow.Log();
      }
    }
  }
}

}  // namespace
}  // namespace pgfleet::testing
