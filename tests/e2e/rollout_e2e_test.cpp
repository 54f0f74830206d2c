// Rolling updates end to end (real schedulers and hosts): a template change
// replaces a service's replicas max_parallel at a time, gated on health;
// canaries wait for promotion; a version that never becomes healthy is
// reverted; two schedulers never run a step twice, and one killed mid-way
// leaves a rollout the other finishes.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

// Replicas that serve: running, wanted and healthy (pgfleet.replica_healthy_since).
const char* kHealthy =
    "select count(*) from pgfleet.jobs j where j.formation = 'web'"
    " and pgfleet.replica_healthy_since(j) is not null";
// Replicas whose process runs, wanted or being stopped.
const char* kRunning =
    "select count(*) from pgfleet.jobs where formation = 'web' and state = 'running'";

std::string LiveByVersion(const TestDatabase& db) {
  return db.Scalar(
      "select coalesce(string_agg(v || '=' || n, ',' order by v), '') from ("
      " select version v, count(*) n from pgfleet.jobs where formation = 'web'"
      "   and state = 'running' and desired_state = 'run' group by version) x");
}

std::string LastRollout(const TestDatabase& db) {
  return db.Scalar(
      "select version || ':' || state from pgfleet.rollout_status where formation = 'web'"
      " order by rollout desc limit 1");
}

class RolloutTest : public ::testing::Test {
 protected:
  void StartFleet(int schedulers) {
    for (int i = 1; i <= schedulers; ++i) cluster_.StartScheduler("s" + std::to_string(i));
    cluster_.StartHost("h1", 4000, 4000);
    cluster_.StartHost("h2", 4000, 4000);
    ASSERT_TRUE(cluster_.WaitHostsUp(2)) << cluster_.Logs();
  }
  void CreateWeb(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"formation", "create",
                                     "web",       "--kind",
                                     "service",   "--replicas",
                                     "4",         "--max-parallel",
                                     "1",         "--min-healthy-time",
                                     "1s",        "--stop-grace",
                                     "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    for (const char* w : {"--", "sleep", "300"}) args.push_back(w);
    auto r = cluster_.Cli(args);
    ASSERT_EQ(0, r.exit_code) << r.out << r.err;
    ASSERT_TRUE(WaitFor([&] { return LiveByVersion(db_) == "1=4"; }, 30s))
        << LiveByVersion(db_) << cluster_.Logs();
    ASSERT_TRUE(WaitFor([&] { return db_.Count(kHealthy) == 4; }, 30s));
  }
  // Samples every 100 ms until `done` holds (or the timeout): the fewest
  // healthy and the most running replicas seen.
  struct Seen {
    long long min_healthy = 1 << 30, max_running = 0;
    bool done = false;
  };
  Seen Sample(const std::function<bool()>& done, std::chrono::seconds timeout) {
    Seen s;
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      s.min_healthy = std::min(s.min_healthy, db_.Count(kHealthy));
      s.max_running = std::max(s.max_running, db_.Count(kRunning));
      if (done()) {
        s.done = true;
        return s;
      }
      std::this_thread::sleep_for(100ms);
    }
    return s;
  }

  // Samples until the rollout has failed, been reverted, and the revert has finished.
  Seen SampleUntilReverted() {
    return Sample(
        [&] {
          return db_.Scalar(
                     "select string_agg(state, ',' order by rollout) from pgfleet.rollout_status"
                     " where formation = 'web'") == "reverted,succeeded";
        },
        90s);
  }
  std::string Rollouts() const {
    return db_.Scalar(
        "select string_agg(state || ':' || coalesce(message, ''), ' | ') from "
        "pgfleet.rollout_status");
  }

  TestDatabase db_;
  Cluster cluster_{db_};
};

TEST_F(RolloutTest, RollingUpdateKeepsThreeHealthyAndAtMostFiveRunning) {
  StartFleet(1);
  CreateWeb();
  auto r = cluster_.Cli({"formation", "update", "web", "--", "sleep", "301"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  EXPECT_EQ("web updated: version 2\n", r.out);
  auto seen = Sample([&] { return LastRollout(db_) == "2:succeeded"; }, 120s);
  ASSERT_TRUE(seen.done) << LastRollout(db_) << " " << LiveByVersion(db_) << cluster_.Logs();
  EXPECT_GE(seen.min_healthy, 3);
  EXPECT_LE(seen.max_running, 5);
  EXPECT_EQ("2=4", LiveByVersion(db_));
  EXPECT_EQ(4, db_.Count("select count(*) from pgfleet.jobs where formation = 'web'"
                         " and state = 'running' and command = '{sleep,301}'"));
  EXPECT_EQ(4, db_.Count("select count(*) from pgfleet.job_events where kind = 'stop_requested'"
                         " and detail = 'replaced by version 2'"));
  EXPECT_EQ(4,
            db_.Count("select count(*) from pgfleet.jobs where formation = 'web' and version = 2"))
      << "exactly one new replica per old one";
  // The CLI shows the history and the rollout.
  r = cluster_.Cli({"formation", "history", "web"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.out.find("changed command")) << r.out;
  r = cluster_.Cli({"formation", "status", "web"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.out.find("succeeded")) << r.out;
  EXPECT_NE(std::string::npos, r.out.find("version 2")) << r.out;
}

TEST_F(RolloutTest, AVersionThatNeverBecomesHealthyIsRevertedAutomatically) {
  StartFleet(1);
  CreateWeb({"--auto-revert", "true", "--progress-deadline", "4s"});
  // Exits at once: restarted with backoff, never healthy.
  auto r = cluster_.Cli({"formation", "update", "web", "--", "sh", "-c", "exit 3"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  auto seen = SampleUntilReverted();
  ASSERT_TRUE(seen.done) << Rollouts() << cluster_.Logs();
  EXPECT_GE(seen.min_healthy, 4) << "no old replica is stopped for one that is not healthy";
  EXPECT_TRUE(WaitFor([&] { return LiveByVersion(db_) == "1=4"; }, 30s)) << LiveByVersion(db_);
  EXPECT_EQ(4, db_.Count(kHealthy));
  EXPECT_EQ("1", db_.Scalar("select version from pgfleet.formations where name = 'web'"));
  EXPECT_EQ("{sleep,300}", db_.Scalar("select command from pgfleet.formations where name = 'web'"));
  EXPECT_NE(std::string::npos,
            db_.Scalar("select message from pgfleet.rollouts where state = 'reverted'")
                .find("became healthy within 00:00:04 (0 healthy); reverted to version 1"))
      << db_.Scalar("select message from pgfleet.rollouts where state = 'reverted'");
}

TEST_F(RolloutTest, AVersionWhoseHealthCheckFailsIsRevertedAndNoOldReplicaStops) {
  StartFleet(1);
  CreateWeb({"--auto-revert", "true", "--progress-deadline", "5s"});
  // Runs, but its check never passes: unhealthy, restarted, never healthy.
  auto r = cluster_.Cli({"formation", "update", "web", "--health-cmd", "false", "--health-interval",
                         "1", "--health-threshold", "1"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  auto seen = SampleUntilReverted();
  ASSERT_TRUE(seen.done) << Rollouts() << cluster_.Logs();
  EXPECT_GE(seen.min_healthy, 4);
  EXPECT_LE(seen.max_running, 5);
  EXPECT_TRUE(WaitFor([&] { return LiveByVersion(db_) == "1=4"; }, 30s)) << LiveByVersion(db_);
  EXPECT_EQ("", db_.Scalar("select coalesce(health_check::text, '') from pgfleet.formations"
                           " where name = 'web'"));
  EXPECT_LE(1, db_.Count("select count(*) from pgfleet.job_events where kind = 'health'"))
      << "the new replica's check ran and failed";
}

TEST_F(RolloutTest, MinHealthyTimeCountsFromThePassingCheckNotFromTheStart) {
  StartFleet(1);
  CreateWeb();
  // The check passes only 3 s after the start: no old replica may stop before.
  auto r = cluster_.Cli({"formation", "update", "web", "--health-grace", "3", "--health-interval",
                         "1", "--health-cmd", "true"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  auto seen = Sample([&] { return LastRollout(db_) == "2:succeeded"; }, 120s);
  ASSERT_TRUE(seen.done) << LastRollout(db_) << cluster_.Logs();
  // Each replaced replica was stopped at least min_healthy_time (1 s) after its
  // replacement's check passed, and so at least grace + 1 s after it started.
  EXPECT_EQ(
      0,
      db_.Count("select count(*) from pgfleet.job_events s"
                " join lateral (select min(e.at) at from pgfleet.job_events e join pgfleet.jobs j"
                "   on j.id = e.job_id where j.version = 2 and e.kind = 'running') first on true"
                " where s.kind = 'stop_requested' and s.detail = 'replaced by version 2'"
                "   and s.at < first.at + interval '4 seconds'"));
  EXPECT_EQ(4, db_.Count("select count(*) from pgfleet.jobs where formation = 'web' and version = 2"
                         " and health = 'healthy'"));
}

TEST_F(RolloutTest, ACanaryRolloutWaitsForPromoteThenFinishes) {
  StartFleet(1);
  CreateWeb({"--canary", "1"});
  auto r = cluster_.Cli({"formation", "update", "web", "--", "sleep", "302"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  ASSERT_TRUE(WaitFor([&] { return LastRollout(db_) == "2:waiting_promotion"; }, 60s))
      << LastRollout(db_) << cluster_.Logs();
  EXPECT_EQ("1=4,2=1", LiveByVersion(db_));
  EXPECT_EQ("t", db_.Scalar("select waiting_for_promotion::text from pgfleet.rollout_status"
                            " order by rollout desc limit 1")
                     .substr(0, 1));
  // Waiting: no old replica goes, however long (sampled for 3 s).
  auto seen = Sample([] { return false; }, 3s);
  EXPECT_EQ(5, seen.max_running);
  EXPECT_GE(seen.min_healthy, 5);
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_events where kind = 'stop_requested'"));
  r = cluster_.Cli({"formation", "promote", "web"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  seen = Sample([&] { return LastRollout(db_) == "2:succeeded"; }, 120s);
  ASSERT_TRUE(seen.done) << LastRollout(db_) << cluster_.Logs();
  EXPECT_GE(seen.min_healthy, 4);
  EXPECT_EQ("2=4", LiveByVersion(db_));
  // Promoting twice is refused, naming why.
  r = cluster_.Cli({"formation", "promote", "web"});
  EXPECT_EQ(1, r.exit_code);
  EXPECT_NE(std::string::npos, r.err.find("formation web has no rollout in progress")) << r.err;
}

TEST_F(RolloutTest, TwoSchedulersNeverRunAStepTwiceAndOneKilledMidwayLeavesItToTheOther) {
  StartFleet(2);
  CreateWeb();
  auto r = cluster_.Cli({"formation", "update", "web", "--", "sleep", "303"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  // Mid-rollout: one replica of the new version replaced an old one.
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_.Count(
                   "select count(*) from pgfleet.job_events where detail = 'replaced by version "
                   "2'") >= 1;
      },
      60s))
      << cluster_.Logs();
  cluster_.processes()[0]->Kill9();  // s1
  auto seen = Sample([&] { return LastRollout(db_) == "2:succeeded"; }, 120s);
  ASSERT_TRUE(seen.done) << LastRollout(db_) << cluster_.Logs();
  EXPECT_GE(seen.min_healthy, 3);
  EXPECT_LE(seen.max_running, 5);
  EXPECT_EQ("2=4", LiveByVersion(db_));
  EXPECT_EQ(4,
            db_.Count("select count(*) from pgfleet.jobs where formation = 'web' and version = 2"))
      << "a step run twice would have made more";
  EXPECT_EQ(4, db_.Count("select count(*) from pgfleet.job_events where kind = 'stop_requested'"
                         " and detail = 'replaced by version 2'"));
  EXPECT_EQ(0, db_.AttemptsWithRepeated("running"));
}

TEST_F(RolloutTest, ASystemFormationReplacesItsReplicasOneHostAtATime) {
  cluster_.StartScheduler("s1");
  for (const char* h : {"h1", "h2", "h3"}) cluster_.StartHost(h, 1000, 1000);
  ASSERT_TRUE(cluster_.WaitHostsUp(3)) << cluster_.Logs();
  auto r = cluster_.Cli({"formation", "create", "agent", "--kind", "system", "--max-parallel", "1",
                         "--min-healthy-time", "1s", "--stop-grace", "1", "--", "sleep", "300"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  const std::string healthy_hosts =
      "select count(distinct j.host_id) from pgfleet.jobs j where j.formation = 'agent'"
      " and pgfleet.replica_healthy_since(j) is not null";
  ASSERT_TRUE(WaitFor([&] { return db_.Count(healthy_hosts) == 3; }, 30s)) << cluster_.Logs();
  r = cluster_.Cli({"formation", "update", "agent", "--", "sleep", "301"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  const std::string state =
      "select state from pgfleet.rollout_status where formation = 'agent' order by rollout desc "
      "limit 1";
  long long fewest = 3;
  ASSERT_TRUE(WaitFor(
      [&] {
        fewest = std::min(fewest, db_.Count(healthy_hosts));
        return db_.Scalar(state) == "succeeded";
      },
      90s))
      << db_.Scalar(state) << cluster_.Logs();
  EXPECT_GE(fewest, 2) << "max_parallel 1: one host at a time without a healthy replica";
  EXPECT_EQ(3,
            db_.Count("select count(*) from pgfleet.jobs where formation = 'agent' and version = 2"
                      " and state = 'running' and desired_state = 'run'"));
  EXPECT_EQ(3,
            db_.Count("select count(distinct host_id) from pgfleet.jobs where formation = 'agent'"
                      " and version = 2 and state = 'running'"));
  EXPECT_EQ(3, db_.Count("select count(*) from pgfleet.job_events where kind = 'stop_requested'"
                         " and detail = 'replaced by version 2'"));
}

TEST_F(RolloutTest, BadUpdatesAreRefusedNamingTheFieldAndChangeNothing) {
  auto r = cluster_.Cli(
      {"formation", "create", "web", "--kind", "service", "--replicas", "1", "--", "sleep", "300"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  const std::string before =
      db_.Scalar("select md5(string_agg(f::text, '|')) from pgfleet.formations f");
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{"formation", "update", "web"}, 2, "nothing to change"},
      {{"formation", "update", "web", "--max-parallel", "0"}, 1, "max_parallel must be a count"},
      {{"formation", "update", "web", "--max-parallel", "150%"}, 1, "max_parallel must be a count"},
      {{"formation", "update", "web", "--min-healthy-time", "-3s"},
       1,
       "min_healthy_time must be between"},
      {{"formation", "update", "web", "--progress-deadline", "soon"}, 1, "progress_deadline"},
      {{"formation", "update", "web", "--canary", "-1"}, 2, "--canary must be >= 0"},
      {{"formation", "update", "web", "--auto-revert", "maybe"},
       2,
       "--auto-revert must be true or false"},
      {{"formation", "update", "web", "--cpu", "-5"}, 2, "cpu must be > 0"},
      {{"formation", "update", "nope", "--cpu", "5"}, 1, "no formation named nope"},
      {{"formation", "revert", "web", "x"}, 2, "VERSION must be a whole number >= 1"},
      {{"formation", "revert", "web", "7"}, 1, "formation web has no version 7"},
      {{"formation", "revert", "web"}, 2, "expected: formation revert NAME VERSION"},
      {{"formation", "promote", "web"}, 1, "formation web has no rollout in progress"},
      {{"formation", "history", "nope"}, 1, "no formation named nope"},
      {{"formation", "status", "nope"}, 1, "no formation named nope"},
      {{"formation", "history", "web", "--", "x"}, 2, "takes no command after --"},
  };
  for (const auto& c : cases) {
    std::string line;
    for (const auto& a : c.args) line += a + " ";
    SCOPED_TRACE(line);
    r = cluster_.Cli(c.args);
    EXPECT_EQ(c.exit_code, r.exit_code) << r.out << r.err;
    EXPECT_NE(std::string::npos, r.err.find(c.error)) << r.err;
  }
  EXPECT_EQ(before, db_.Scalar("select md5(string_agg(f::text, '|')) from pgfleet.formations f"));
  EXPECT_EQ(1,
            db_.Count("select count(*) from pgfleet.formation_versions v"
                      " join pgfleet.formations f on f.id = v.formation_id where f.name = 'web'"));
}

}  // namespace
}  // namespace pgfleet::testing
