// Preemption with real daemons (docs/preemption.md): on a full cluster a
// priority-90 job has the scheduler stop the fewest priority-10 jobs on one
// host and runs once they have stopped; they run again later and end
// succeeded; a service with min_available = 2 of 3 loses at most one
// replica; a job of equal priority preempts nothing. Hosts are sampled
// every 50 ms throughout: never overcommitted, neither by their allocation
// nor by the jobs assigned or running on them.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

// Samples every 50 ms until destroyed: host-samples overcommitted, and the
// fewest running replicas of formation `service` seen ("" : not sampled).
class Sampler {
 public:
  explicit Sampler(const TestDatabase& db, std::string service = "")
      : thread_([this, &db, service] {
          auto c = db.Connect();
          while (!stop_) {
            pqxx::work tx(*c);
            over_ += tx.exec1(
                "select count(*) from pgfleet.hosts h left join lateral ("
                "  select sum(j.cpu) as cpu, sum(j.memory) as memory from pgfleet.jobs j"
                "   where j.host_id = h.id and j.state in ('assigned', 'running')) l on true"
                " where h.cpu_allocated > h.cpu or h.memory_allocated > h.memory"
                "    or l.cpu > h.cpu or l.memory > h.memory")[0]
                    .as<long long>();
            if (!service.empty()) {
              const int n = tx.exec1(
                  "select count(*) from pgfleet.jobs where formation = " + tx.quote(service) +
                  " and state = 'running' and desired_state = 'run'")[0]
                                  .as<int>();
              min_serving_ = std::min(min_serving_.load(), n);
            }
            tx.commit();
            ++samples_;
            std::this_thread::sleep_for(50ms);
          }
        }) {}
  ~Sampler() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  long long over() const { return over_; }
  long long samples() const { return samples_; }
  int min_serving() const { return min_serving_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<long long> over_{0}, samples_{0};
  std::atomic<int> min_serving_{1000};
  std::thread thread_;
};

std::string Submit(const TestDatabase& db, int cpu, int priority, const std::string& seconds,
                   const std::string& formation = "default") {
  return db.Scalar("select pgfleet.submit(array['sleep', '" + seconds + "'], '" + formation +
                   "', " + std::to_string(cpu) + ", 64, priority => " + std::to_string(priority) +
                   ")");
}

std::string Jobs(const TestDatabase& db) {
  return db.Scalar(
      "select string_agg(id || ':' || formation || ':p' || priority || ':' || state || '/' || "
      "desired_state || '@' || coalesce(host_id, '-') || ' a' || attempt, ' ' order by id) "
      "from pgfleet.jobs");
}

TEST(PreemptionE2eTest, APriority90JobPreemptsTheFewestPriority10JobsAndTheyAllSucceedLater) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartScheduler("s2");
  cluster.StartHost("h1", 1000, 1000);
  cluster.StartHost("h2", 1000, 1000);
  ASSERT_TRUE(cluster.WaitHostsUp(2)) << cluster.Logs();
  // h1 holds one job of 600 and one of 400; h2 four of 250 (bin-packing
  // fills h1 first). Room for 600 takes one victim on h1, two on h2.
  std::vector<std::string> low;
  Sampler sampler(db);
  for (int cpu : {600, 400, 250, 250, 250, 250}) low.push_back(Submit(db, cpu, 10, "8"));
  ASSERT_TRUE(WaitFor(
      [&] { return db.Count("select count(*) from pgfleet.jobs where state = 'running'") == 6; },
      30s))
      << Jobs(db) << cluster.Logs();
  const std::string big_host = db.Scalar("select host_id from pgfleet.jobs where id = " + low[0]);

  const std::string high = Submit(db, 600, 90, "1");
  ASSERT_TRUE(WaitFor(
      [&] { return db.Scalar("select state from pgfleet.jobs where id = " + high) == "succeeded"; },
      30s))
      << Jobs(db) << cluster.Logs();
  // One victim: the 600 (a single job of priority 10 frees enough).
  EXPECT_EQ(1, db.Count("select count(*) from pgfleet.job_events where kind = 'stop_requested' "
                        "and detail like 'preempted by job " +
                        high + " (priority 90)%'"))
      << Jobs(db);
  EXPECT_EQ(low[0], db.Scalar("select string_agg(job_id::text, ',') from pgfleet.job_events "
                              "where kind = 'stop_requested'"));
  EXPECT_EQ(big_host, db.Scalar("select host_id from pgfleet.jobs where id = " + high));
  EXPECT_EQ(1, db.Count("select count(*) from pgfleet.job_events where job_id = " + high +
                        " and kind = 'preempting'"));

  ASSERT_TRUE(WaitFor(
      [&] { return db.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == 7; },
      60s))
      << Jobs(db) << cluster.Logs();
  sampler.Stop();
  // The victim ran again as a second attempt, no failure counted (max_attempts 1).
  EXPECT_EQ("2/0/1", db.Scalar("select attempt || '/' || failures || '/' || max_attempts "
                               "from pgfleet.jobs where id = " +
                               low[0]));
  EXPECT_EQ(1, db.Count("select count(*) from pgfleet.job_events where job_id = " + low[0] +
                        " and kind = 'requeued' and detail like 'preempted by job%'"));
  EXPECT_EQ(5, db.Count("select count(*) from pgfleet.jobs where attempt = 1 and priority = 10"));
  EXPECT_GT(sampler.samples(), 20);
  EXPECT_EQ(0, sampler.over()) << "a host was overcommitted";
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.allocation_drift"));
}

TEST(PreemptionE2eTest, AServiceWithMinAvailable2Of3LosesAtMostOneReplica) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 3000, 3000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  // By the CLI, as docs/preemption.md shows it.
  auto create = cluster.Cli({"formation", "create", "web", "--kind", "service", "--replicas", "3",
                             "--cpu", "1000", "--memory", "64", "--priority", "10",
                             "--preemptible", "true", "--min-available", "2", "--", "sleep",
                             "300"});
  ASSERT_EQ(0, create.exit_code) << create.out << create.err;
  EXPECT_EQ("true 2", db.Scalar("select preemptible || ' ' || min_available from pgfleet.formations "
                             "where name = 'web'"));
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.jobs where formation = 'web' and state = "
                   "'running'") == 3;
      },
      30s))
      << Jobs(db) << cluster.Logs();
  Sampler sampler(db, "web");
  // Two jobs that each need a replica's room: the budget allows one.
  const std::string p1 = Submit(db, 1000, 90, "2", "urgent");
  const std::string p2 = Submit(db, 1000, 90, "2", "urgent");
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.jobs where formation = 'urgent' and "
                   "state = 'succeeded'") == 2 &&
               db.Count(
                   "select count(*) from pgfleet.jobs where formation = 'web' and "
                   "state = 'running'") == 3;
      },
      60s))
      << Jobs(db) << cluster.Logs();
  sampler.Stop();
  EXPECT_GE(sampler.min_serving(), 2) << "preemption took web below min_available";
  EXPECT_EQ(1, db.Count("select count(*) from pgfleet.jobs where formation = 'web' and state = "
                        "'cancelled' and error like 'preempted by job%'"))
      << Jobs(db);
  EXPECT_EQ(1, db.Count("select count(*) from pgfleet.job_events where kind = 'preempting'"));
  EXPECT_EQ(0, sampler.over()) << "a host was overcommitted";

  // Back to the kind's default and no budget: the live replicas follow.
  auto update = cluster.Cli({"formation", "update", "web", "--preemptible", "default",
                             "--min-available", "none"});
  ASSERT_EQ(0, update.exit_code) << update.out << update.err;
  EXPECT_EQ("true true", db.Scalar("select (preemptible is null) || ' ' || (min_available is null) "
                             "from pgfleet.formations where name = 'web'"));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.jobs where formation = 'web' and "
                        "state in ('pending', 'assigned', 'running') and preemptible"));

  // A batch job is preemptible unless `run --preemptible false` says not.
  auto kept = cluster.Cli({"run", "--preemptible", "false", "--", "true"});
  ASSERT_EQ(0, kept.exit_code) << kept.err;
  auto plain = cluster.Cli({"run", "--", "true"});
  ASSERT_EQ(0, plain.exit_code) << plain.err;
  EXPECT_EQ("false true",
            db.Scalar("select string_agg(preemptible::text, ' ' order by id) from pgfleet.jobs "
                      "where id in (" + kept.out.substr(0, kept.out.find('\n')) + ", " +
                      plain.out.substr(0, plain.out.find('\n')) + ")"));
}

TEST(PreemptionE2eTest, AJobOfEqualPriorityPreemptsNothingSampledUntilItRuns) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  cluster.StartHost("h1", 1000, 1000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  Sampler sampler(db);
  const std::string first = Submit(db, 1000, 50, "3");
  ASSERT_TRUE(WaitFor(
      [&] { return db.Scalar("select state from pgfleet.jobs where id = " + first) == "running"; },
      30s))
      << Jobs(db) << cluster.Logs();
  const std::string second = Submit(db, 1000, 50, "1");
  // It runs only once the first has ended by itself.
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Scalar("select state from pgfleet.jobs where id = " + second) == "succeeded";
      },
      30s))
      << Jobs(db) << cluster.Logs();
  sampler.Stop();
  EXPECT_EQ("succeeded/1",
            db.Scalar("select state || '/' || attempt from pgfleet.jobs where id = " + first));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.job_events where kind in "
                        "('stop_requested', 'preempting')"));
  EXPECT_EQ(0, sampler.over());
}

}  // namespace
}  // namespace pgfleet::testing
