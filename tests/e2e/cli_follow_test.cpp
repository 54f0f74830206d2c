// `pgfleet logs -f` and `pgfleet run --wait` on a job that stays quiet longer
// than the CLI's read timeout (30 s): both follow to the end and print the
// output exactly once (the first hour issue, items 1 and 2). They used to give
// up after 30 s of silence; run --wait then printed the stored tail on top of
// what it had streamed.

#include <gtest/gtest.h>
#include <httplib.h>

#include <future>
#include <thread>

#include "core/net/http.h"
#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

TEST(CliFollowTest, QuietJobsAreFollowedToTheEndAndTheirOutputPrintedOnce) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  const std::string quiet = "echo start; sleep 35; echo end";

  // run --wait, in the background.
  auto waited = std::async(std::launch::async, [&] {
    return cluster.Cli({"run", "--wait", "--", "sh", "-c", quiet}, 90s);
  });
  // logs -f of another such job, once it runs.
  auto submitted = cluster.Cli({"run", "--", "sh", "-c", quiet});
  ASSERT_EQ(0, submitted.exit_code) << submitted.err;
  std::string id = submitted.out.substr(0, submitted.out.find('\n'));
  ASSERT_TRUE(WaitFor(
      [&] { return db.Scalar("select state from pgfleet.jobs where id = " + id) == "running"; },
      20s));
  auto followed = cluster.Cli({"logs", id, "-f"}, 90s);
  EXPECT_EQ(0, followed.exit_code) << followed.err;
  EXPECT_EQ("start\nend\n", followed.out) << followed.err;

  auto run = waited.get();
  EXPECT_EQ(0, run.exit_code) << run.err;
  // Its output once, live, in order (the id went to stderr).
  EXPECT_EQ("start\nend\n", run.out) << run.err;
}

// What a resumed stream asks hostd for: the log from a byte offset on.
TEST(CliFollowTest, HostdServesALogFromAByteOffset) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  auto r = cluster.Cli({"run", "--wait", "--", "printf", "abcdef"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  std::string id = db.Scalar("select max(id) from pgfleet.jobs");
  httplib::Client c(db.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
  c.set_bearer_token_auth(net::ReadTokenFile(cluster.token_file()).c_str());
  auto get = [&](const std::string& query) { return c.Get("/v1/jobs/" + id + "/logs?" + query); };
  auto from3 = get("offset=3");
  ASSERT_TRUE(from3);
  EXPECT_EQ(200, from3->status);
  EXPECT_EQ("def", from3->body);
  auto past = get("offset=100");
  ASSERT_TRUE(past);
  EXPECT_EQ("", past->body);
  auto negative = get("offset=-1");
  ASSERT_TRUE(negative);
  EXPECT_EQ(400, negative->status);
  EXPECT_NE(std::string::npos, negative->body.find("offset must be a non-negative integer"))
      << negative->body;
  auto both = get("offset=2&tail=1");
  ASSERT_TRUE(both);
  EXPECT_EQ(400, both->status);
  EXPECT_NE(std::string::npos, both->body.find("offset and tail exclude each other")) << both->body;
}

// `logs --attempt N` reads each attempt from the host that ran it (the first
// hour issue, item 3): it used to ask the latest attempt's host and print the
// wrong attempt's output; an attempt that never existed exited 0.
TEST(CliFollowTest, EachAttemptsLogComesFromTheHostThatRanIt) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  auto r =
      cluster.Cli({"run", "--", "sh", "-c", "echo output-of-attempt-$PGFLEET_ATTEMPT; sleep 60"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  std::string id = util::Trim(r.out);
  auto state = [&] {
    return db.Scalar(
        "select state || '/' || attempt || '/' || host_id from pgfleet.jobs where id = " + id);
  };
  ASSERT_TRUE(WaitFor([&] { return state() == "running/1/h1"; }, 20s)) << cluster.Logs();
  // Moved: h2 joins, h1 is drained at once; attempt 2 runs on h2.
  cluster.StartHost("h2", 4000, 4000);
  ASSERT_TRUE(cluster.WaitHostsUp(2)) << cluster.Logs();
  ASSERT_EQ(0, cluster.Cli({"drain", "h1", "--deadline", "0s"}).exit_code);
  ASSERT_TRUE(WaitFor([&] { return state() == "running/2/h2"; }, 30s)) << state() << cluster.Logs();

  auto logs = [&](const std::string& attempt) {
    return cluster.Cli({"logs", id, "--attempt", attempt});
  };
  ASSERT_TRUE(WaitFor([&] { return logs("2").out == "output-of-attempt-2\n"; }, 10s))
      << logs("2").out << logs("2").err;
  auto first = logs("1");
  EXPECT_EQ(0, first.exit_code) << first.err;
  EXPECT_EQ("output-of-attempt-1\n", first.out) << first.err;
  EXPECT_EQ("", first.err);
  auto latest = cluster.Cli({"logs", id});
  EXPECT_EQ("output-of-attempt-2\n", latest.out) << latest.err;

  auto none = logs("3");
  EXPECT_EQ(1, none.exit_code);
  EXPECT_NE(std::string::npos, none.err.find("has no attempt 3 (its attempts: 1-2)")) << none.err;
  EXPECT_EQ("", none.out);

  // The host of attempt 1 is gone from the cluster: said, not guessed.
  cluster.processes()[1]->Stop();  // h1's hostd (after s1)
  db.Scalar("delete from pgfleet.hosts where id = 'h1'; select 1");
  auto gone = logs("1");
  EXPECT_EQ(1, gone.exit_code);
  EXPECT_NE(std::string::npos, gone.err.find("ran on host h1, which is no longer registered"))
      << gone.err;
  EXPECT_EQ("", gone.out);
}

}  // namespace
}  // namespace pgfleet::testing
