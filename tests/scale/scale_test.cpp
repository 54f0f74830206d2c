// Correctness at scale (issue 10): the real schedulers and hostd's hollow
// hosts (`pgfleet-hostd --simulate N`, one process) against a real
// PostgreSQL. Every job of a large burst succeeds exactly once, no host is
// ever overcommitted (sampled while the burst runs), and every host's
// allocations are back to zero at the end.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kHosts = 200;
constexpr int kJobs = 20000;

TEST(ScaleTest, TwoHundredHollowHostsTwoSchedulersTwentyThousandJobsEachSucceedExactlyOnce) {
  TestDatabase db;
  Cluster cluster(db);
  // A raw pointer: the vector grows as schedulers start.
  Process* hosts =
      cluster.processes()
          .emplace_back(std::make_unique<Process>(
              std::vector<std::string>{BinaryPath("pgfleet-hostd"), "--db", db.dsn(),
                                       "--token-file", cluster.token_file(), "--simulate",
                                       std::to_string(kHosts), "--id-prefix", "sim-", "--cpu",
                                       "1000", "--memory", "1024", "--heartbeat-interval", "1",
                                       "--db-connections", "4", "--log-level", "warn"},
              cluster.dir() + "/hollow.log"))
          .get();
  ASSERT_TRUE(cluster.WaitHostsUp(kHosts, 60s)) << hosts->Log();
  cluster.StartScheduler("s1", {"--log-level", "warn"});
  cluster.StartScheduler("s2", {"--log-level", "warn"});

  // Every host fits 10 jobs of 100 millicores at once: 2,000 slots for 20,000 jobs.
  db.Scalar(
      "insert into pgfleet.jobs (command, env) select '{true}', "
      "'{\"PGFLEET_SIM_SECONDS\":\"0.05\"}' from generate_series(1, " +
      std::to_string(kJobs) + ")");
  OvercommitSampler sampler(db);
  bool all_done = WaitFor(
      [&] {
        return db.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == kJobs;
      },
      240s);
  sampler.Stop();
  ASSERT_TRUE(all_done)
      << db.Scalar(
             "select string_agg(state || '=' || n, ' ') from (select state, count(*) n from "
             "pgfleet.jobs group by state) s")
      << "\n"
      << cluster.Logs();

  EXPECT_GT(sampler.samples(), 0);
  EXPECT_EQ(sampler.overcommitted(), 0);
  EXPECT_EQ(db.AttemptsWithRepeated("running"), 0);
  EXPECT_EQ(db.AttemptsWithRepeated("assigned"), 0);
  // Exactly one attempt of each job succeeded. (A dispatch that times out on
  // a loaded machine requeues its jobs as new attempts; that is allowed, and
  // counted here so a regression shows.)
  EXPECT_EQ(db.Count("select count(*) from (select job_id from pgfleet.job_events where kind = "
                     "'succeeded' group by job_id having count(*) = 1) x"),
            kJobs);
  std::cout << "scale: hosts=" << kHosts << " jobs=" << kJobs << " requeued_attempts="
            << db.Scalar("select count(*) from pgfleet.jobs where attempt > 1") << " events="
            << db.Scalar(
                   "select string_agg(kind || '=' || n, ' ' order by kind) from (select kind, "
                   "count(*) n from pgfleet.job_events group by kind) k")
            << " overcommit_samples=" << sampler.samples() << "\n";
  // Jobs spread: placement bin-packs, so how many hosts get work depends on
  // timing, but one claimed batch (500) of 100-millicore jobs needs at least
  // 50 hosts of 1000 millicores.
  EXPECT_GE(db.Count("select count(distinct host_id) from pgfleet.jobs"), 50);
  EXPECT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.hosts where cpu_allocated <> 0 or "
                   "memory_allocated <> 0") == 0;
      },
      10s));
  EXPECT_TRUE(hosts->Running()) << hosts->Log();
}

}  // namespace
}  // namespace pgfleet::testing
