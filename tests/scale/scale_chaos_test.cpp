// Chaos at scale (issue 10): 500 hollow hosts in 50 pgfleet-hostd processes of
// 10, 3 schedulers, 20,000 jobs. Every 2 s a random process (2% of the hosts)
// is killed with SIGKILL and comes back 4 s later with the same host ids;
// every 5 s a random scheduler is killed and restarted 1 s later. At the end
// every job has ended exactly once, no attempt ran twice, no host was ever
// overcommitted (sampled), and every allocation is back to zero.

#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kProcesses = 50;
constexpr int kHostsPerProcess = 10;
constexpr int kSchedulers = 3;
constexpr int kJobs = 20000;
const std::string kTtl = "3";

class ScaleChaos {
 public:
  explicit ScaleChaos(const TestDatabase& db) : db_(db), cluster_(db) {}

  void StartHosts(int k) {
    hosts_[static_cast<size_t>(k)] =
        std::make_unique<Process>(std::vector<std::string>{BinaryPath("pgfleet-hostd"),
                                                           "--db",
                                                           db_.dsn(),
                                                           "--token-file",
                                                           cluster_.token_file(),
                                                           "--simulate",
                                                           std::to_string(kHostsPerProcess),
                                                           "--id-prefix",
                                                           "c" + std::to_string(k) + "-",
                                                           "--cpu",
                                                           "1000",
                                                           "--memory",
                                                           "1024",
                                                           "--heartbeat-interval",
                                                           "0.5",
                                                           "--host-ttl",
                                                           kTtl,
                                                           "--db-connections",
                                                           "1",
                                                           "--log-level",
                                                           "warn"},
                                  cluster_.dir() + "/hollow-" + std::to_string(k) + ".log");
  }
  void StartScheduler(int k) {
    std::string id = "s" + std::to_string(k);
    schedulers_[static_cast<size_t>(k)] =
        &cluster_.StartScheduler(id, {"--host-ttl", kTtl, "--log-level", "warn"});
  }
  Cluster& cluster() { return cluster_; }
  std::vector<std::unique_ptr<Process>>& hosts() { return hosts_; }
  std::vector<Process*>& schedulers() { return schedulers_; }

 private:
  const TestDatabase& db_;
  Cluster cluster_;
  std::vector<std::unique_ptr<Process>> hosts_{kProcesses};
  std::vector<Process*> schedulers_{kSchedulers};
};

std::string StateCounts(const TestDatabase& db) {
  return db.Scalar(
      "select string_agg(state || '=' || n, ' ' order by state) from (select state, count(*) n "
      "from pgfleet.jobs group by state) s");
}

TEST(ScaleChaosTest, FiveHundredHollowHostsThreeSchedulersKilledOftenEveryJobEndsExactlyOnce) {
  TestDatabase db;
  ScaleChaos chaos(db);
  for (int k = 0; k < kProcesses; ++k) chaos.StartHosts(k);
  ASSERT_TRUE(chaos.cluster().WaitHostsUp(kProcesses * kHostsPerProcess, 90s))
      << chaos.cluster().Logs();
  for (int k = 0; k < kSchedulers; ++k) chaos.StartScheduler(k);

  // 10 slots of 100 millicores per host: 5,000 slots; jobs "run" 0.5 s.
  db.Scalar(
      "insert into pgfleet.jobs (command, env) select '{true}', "
      "'{\"PGFLEET_SIM_SECONDS\":\"0.5\"}' from generate_series(1, " +
      std::to_string(kJobs) + ")");
  OvercommitSampler sampler(db);
  std::mt19937 rng(20261124);
  int host_kills = 0, scheduler_kills = 0;
  std::vector<Clock::time_point> host_back(kProcesses), scheduler_back(kSchedulers);
  auto next_host_kill = Clock::now() + 2s, next_scheduler_kill = Clock::now() + 5s;
  auto deadline = Clock::now() + 240s;
  auto unfinished = [&] {
    return db.Count(
        "select count(*) from pgfleet.jobs where state not in ('succeeded', 'failed', "
        "'cancelled')");
  };
  while (Clock::now() < deadline && unfinished() > 0) {
    auto now = Clock::now();
    for (int k = 0; k < kProcesses; ++k) {  // bring back what was killed 4 s ago
      if (!chaos.hosts()[static_cast<size_t>(k)] && now >= host_back[static_cast<size_t>(k)])
        chaos.StartHosts(k);
    }
    for (int k = 0; k < kSchedulers; ++k) {
      if (!chaos.schedulers()[static_cast<size_t>(k)] &&
          now >= scheduler_back[static_cast<size_t>(k)])
        chaos.StartScheduler(k);
    }
    if (now >= next_host_kill) {
      int k = static_cast<int>(rng() % kProcesses);
      if (auto& p = chaos.hosts()[static_cast<size_t>(k)]) {
        p->Kill9();
        p.reset();
        host_back[static_cast<size_t>(k)] = now + 4s;
        ++host_kills;
      }
      next_host_kill = now + 2s;
    }
    if (now >= next_scheduler_kill) {
      int k = static_cast<int>(rng() % kSchedulers);
      if (Process* p = chaos.schedulers()[static_cast<size_t>(k)]) {
        p->Kill9();
        chaos.schedulers()[static_cast<size_t>(k)] = nullptr;
        scheduler_back[static_cast<size_t>(k)] = now + 1s;
        ++scheduler_kills;
      }
      next_scheduler_kill = now + 5s;
    }
    std::this_thread::sleep_for(200ms);
  }
  sampler.Stop();
  ASSERT_EQ(unfinished(), 0) << StateCounts(db);

  // Ended exactly once: one terminal event per job; failed only by the
  // host-loss rule (an attempt lost on pgfleet.host_loss_limit() hosts).
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs where state = 'failed' and "
                     "host_losses < pgfleet.host_loss_limit()"),
            0)
      << db.Scalar(
             "select string_agg(n || ' x ' || e, '; ') from (select count(*) n, "
             "left(error, 150) e from pgfleet.jobs where state = 'failed' group by 2 "
             "order by 1 desc limit 5) x")
      << "\n"
      << db.Scalar(
             "select string_agg(kind || ':' || coalesce(detail, ''), ' | ' order by id) "
             "from pgfleet.job_events where job_id = (select min(id) from pgfleet.jobs "
             "where state = 'failed')");
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs where state not in ('succeeded', "
                     "'failed')"),
            0);
  // One end per job: a succeeded job has exactly one succeeded event; a failed
  // one exactly one lost event that gave up, and no succeeded event.
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs j where (select count(*) from "
                     "pgfleet.job_events e where e.job_id = j.id and (e.kind in ('succeeded', "
                     "'failed', 'cancelled') or e.kind = 'lost' and e.detail like '%giving up')) "
                     "<> 1"),
            0)
      << db.Scalar(
             "select string_agg(h, E'\\n') from (select j.id || ' ' || j.state || ': ' || "
             "(select string_agg(e.attempt || ':' || e.kind || ':' || coalesce(e.host_id, '') || "
             "':' || left(coalesce(e.detail, ''), 60), ' | ' order by e.id) from "
             "pgfleet.job_events e where e.job_id = j.id) h from pgfleet.jobs j where (select "
             "count(*) from pgfleet.job_events e where e.job_id = j.id and (e.kind in "
             "('succeeded', 'failed', 'cancelled') or e.kind = 'lost' and e.detail like "
             "'%giving up')) <> 1 order by j.id limit 5) x");
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs j where j.state = 'succeeded' and exists "
                     "(select 1 from pgfleet.job_events e where e.job_id = j.id and e.kind = "
                     "'succeeded' and e.attempt = j.attempt)"),
            db.Count("select count(*) from pgfleet.jobs where state = 'succeeded'"));
  // No attempt started or placed twice.
  EXPECT_EQ(db.AttemptsWithRepeated("running"), 0);
  EXPECT_EQ(db.AttemptsWithRepeated("assigned"), 0);
  EXPECT_GT(sampler.samples(), 0);
  EXPECT_EQ(sampler.overcommitted(), 0);
  EXPECT_GT(host_kills, 0);
  EXPECT_GT(scheduler_kills, 0);
  EXPECT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.hosts where cpu_allocated <> 0 or "
                   "memory_allocated <> 0") == 0;
      },
      30s))
      << db.Scalar(
             "select string_agg(id || ':' || cpu_allocated, ' ') from pgfleet.hosts where "
             "cpu_allocated <> 0");
  std::cout << "scale-chaos: jobs=" << kJobs << " states=" << StateCounts(db)
            << " host_kills=" << host_kills << " scheduler_kills=" << scheduler_kills
            << " requeued_attempts="
            << db.Scalar("select count(*) from pgfleet.jobs where attempt > 1") << " lost_events="
            << db.Scalar("select count(*) from pgfleet.job_events where kind = 'lost'")
            << " overcommit_samples=" << sampler.samples() << "\n";
}

}  // namespace
}  // namespace pgfleet::testing
