// A job's shim fences it when its hostd stops and stays away, with real
// processes: once the lease (the host TTL less its margin) runs out the
// shim kills the job, before any scheduler may declare the host lost, so a
// job never runs twice at once; a hostd restarted within the fence time
// keeps its jobs running.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hostd_fencing_fixture.h"

namespace pgfleet::testing::fencing {
namespace {

TEST_F(HostdFencingTest, AJobOutlivingItsStoppedHostdIsFencedByItsShimAndReportedLost) {
  db_ = std::make_unique<TestDatabase>();
  cluster_ = std::make_unique<Cluster>(*db_);
  // Shim fencing is the default: no flag.
  std::vector<std::string> args = {"--host-ttl", "2"};
  Process* host = &cluster_->StartHost("h1", 4000, 4000, args);
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  std::string id = db_->Scalar("select pgfleet.submit(array['sh', '-c', '" +
                               std::string(kJobWithChild) + "'], 'manual')");
  db_->Scalar("select count(*) from pgfleet.assign_jobs('[{\"job\": " + id +
              ", \"host\": \"h1\"}]')");
  JobProcs procs = Running(id, "h1", 1);
  ASSERT_FALSE(HasFailure());

  // hostd is stopped (SIGTERM, as systemctl stop) and stays away: nobody
  // heartbeats, so the job's own shim fences it once the lease (TTL less its
  // margin) has run out, before any scheduler may declare the host lost.
  EXPECT_EQ(0, host->Stop());
  auto stopped = Clock::now();
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(procs.AnyAlive()) << "hostd's stop alone must not kill the job";
  ASSERT_TRUE(WaitFor([&] { return !procs.AnyAlive(); }, 6s));
  double after = std::chrono::duration<double>(Clock::now() - stopped).count();
  EXPECT_LT(after, 2.0);

  // Back: the shim's outcome is reported. The fence, not the job, ended the
  // attempt: it was lost with its host and the job waits for a new attempt
  // (the host-loss rule), its attempts unspent.
  host = &cluster_->StartHost("h1", 4000, 4000, args);
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "pending"; }, 15s))
      << Job(id, "state") << "\n"
      << host->Log();
  EXPECT_EQ("1", Job(id, "host_losses"));
  EXPECT_EQ("0", Job(id, "failures"));
  EXPECT_NE(std::string::npos, Job(id, "error").find("shim self-fenced")) << Job(id, "error");
  EXPECT_EQ(1, db_->Count("select count(*) from pgfleet.job_events where kind = 'running'"));
}

// Marks written by every attempt of a job: "<attempt> <CLOCK_REALTIME ns>"
// every 50 ms, to one file the test reads.
struct Marks {
  std::string file;
  std::string Command() const {
    return "while :; do echo \"$PGFLEET_ATTEMPT $(date +%s%N)\" >> " + file + "; sleep 0.05; done";
  }
  // First and last mark of each attempt.
  std::map<int, std::pair<long long, long long>> Spans() const {
    std::map<int, std::pair<long long, long long>> spans;
    std::ifstream f(file);
    int attempt;
    long long t;
    while (f >> attempt >> t) {
      auto [it, fresh] = spans.try_emplace(attempt, t, t);
      if (!fresh) it->second = {std::min(it->second.first, t), std::max(it->second.second, t)};
    }
    return spans;
  }
};

TEST_F(HostdFencingTest, AHostdStoppedLongerThanTheTtlNeverLetsAJobRunTwice) {
  db_ = std::make_unique<TestDatabase>();
  cluster_ = std::make_unique<Cluster>(*db_);
  cluster_->StartScheduler("s1", {"--host-ttl", "2"});
  Process* h1 = &cluster_->StartHost("h1", 1000, 1000, {"--host-ttl", "2"});
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  Marks marks{cluster_->dir() + "/marks"};
  std::string id =
      db_->Scalar("select pgfleet.submit(array['sh', '-c', '" + marks.Command() + "'])");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "running"; }, 20s)) << cluster_->Logs();
  cluster_->StartHost("h2", 1000, 1000, {"--host-ttl", "2"});
  ASSERT_TRUE(cluster_->WaitHostsUp(2)) << cluster_->Logs();

  // A plain stop of h1's hostd, no drain: its job is fenced by its shim, then
  // the host is declared lost and the job runs again on h2. (Its second
  // attempt may be placed on h1 first, whose last heartbeat still shows it up:
  // that dispatch fails and the third attempt runs on h2.)
  EXPECT_EQ(0, h1->Stop());
  ASSERT_TRUE(WaitFor(
      [&] {
        return Job(id, "state") == "running" && std::stoi(Job(id, "attempt")) >= 2 &&
               Job(id, "host_id") == "h2";
      },
      20s))
      << Job(id, "state") << " " << Job(id, "attempt") << "\n"
      << cluster_->Logs();
  int again = std::stoi(Job(id, "attempt"));
  std::this_thread::sleep_for(1s);  // both attempts have written marks by now
  auto spans = marks.Spans();
  ASSERT_EQ(2u, spans.size()) << "only attempts 1 and " << again << " may run\n"
                              << cluster_->Logs();
  ASSERT_EQ(1u, spans.count(again));
  EXPECT_LT(spans[1].second, spans[again].first)
      << "attempt 1 wrote its last mark " << (spans[1].second - spans[again].first) / 1000000
      << " ms after attempt " << again << " wrote its first";
  // And attempt 1 stays dead.
  auto last1 = spans[1].second;
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(last1, marks.Spans()[1].second);
}

TEST_F(HostdFencingTest, AHostdRestartedWithinTheFenceTimeKeepsItsJobsRunning) {
  db_ = std::make_unique<TestDatabase>();
  cluster_ = std::make_unique<Cluster>(*db_);
  cluster_->StartScheduler("s1", {"--host-ttl", "4"});
  Process* h1 = &cluster_->StartHost("h1", 1000, 1000, {"--host-ttl", "4"});
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  Marks marks{cluster_->dir() + "/marks"};
  std::string id =
      db_->Scalar("select pgfleet.submit(array['sh', '-c', '" + marks.Command() + "'])");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "running"; }, 20s)) << cluster_->Logs();
  std::string pid = Job(id, "pid");

  // Stopped and started again at once: the new hostd heartbeats well within
  // the fence time (3.5 s after the stopping hostd's last heartbeat), so the
  // shim keeps the job running; nothing is re-run.
  EXPECT_EQ(0, h1->Stop());
  h1 = &cluster_->StartHost("h1", 1000, 1000, {"--host-ttl", "4"});
  std::this_thread::sleep_for(8s);  // twice the TTL
  EXPECT_EQ("running", Job(id, "state")) << h1->Log();
  EXPECT_EQ("1", Job(id, "attempt"));
  EXPECT_EQ(pid, Job(id, "pid"));
  EXPECT_FALSE(ProcessGone(pid));
  EXPECT_EQ(1, db_->Count("select count(*) from pgfleet.job_events where kind = 'running'"));
  auto spans = marks.Spans();
  ASSERT_EQ(1u, spans.size());
  auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  EXPECT_LT(now_ns - spans[1].second, 1'000'000'000LL) << "the job stopped writing marks";
}

}  // namespace
}  // namespace pgfleet::testing::fencing
