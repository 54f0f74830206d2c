// Several active schedulers under a concurrent storm: 3 schedulers, 3 hosts,
// 40 batch formations x 50 jobs inserted by 4 clients at once, 5 service
// formations scaled up and down meanwhile; then the same with a scheduler
// killed with SIGKILL mid-run and restarted.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kBatchFormations = 40;
constexpr int kJobsPerFormation = 50;
constexpr int kServices = 5;

class ConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(db_);
    for (int i = 1; i <= 3; ++i) cluster_->StartScheduler("s" + std::to_string(i));
    for (int i = 1; i <= 3; ++i) cluster_->StartHost("h" + std::to_string(i), 3000, 4000);
    ASSERT_TRUE(cluster_->WaitHostsUp(3)) << cluster_->Logs();
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs();
  }

  // Samples the invariants every 50 ms until stopped; counts violations.
  void StartSampler() {
    sampler_ = std::thread([this] {
      auto conn = db_.Connect();
      while (!stop_sampler_) {
        pqxx::work tx(*conn);
        auto over = tx.exec1(
                          "select count(*) from pgfleet.hosts where cpu_allocated > cpu or "
                          "memory_allocated > memory"
                          "   or cpu_allocated < 0 or memory_allocated < 0")[0]
                        .as<int>();
        auto drift = tx.exec1("select count(*) from pgfleet.allocation_drift")[0].as<int>();
        tx.commit();
        overcommit_samples_ += over;
        drift_samples_ += drift;
        ++samples_;
        std::this_thread::sleep_for(50ms);
      }
    });
  }
  void StopSampler() {
    stop_sampler_ = true;
    if (sampler_.joinable()) sampler_.join();
  }

  void SubmitEverythingConcurrently() {
    for (int s = 0; s < kServices; ++s) {
      auto r =
          cluster_->Cli({"formation", "create", "svc" + std::to_string(s), "--kind", "service",
                         "--replicas", "2", "--cpu", "50", "--memory", "16", "--", "sleep", "600"});
      ASSERT_EQ(0, r.exit_code) << r.err;
    }
    std::vector<std::thread> clients;
    for (int c = 0; c < 4; ++c) {
      clients.emplace_back([this, c] {
        auto conn = db_.Connect();
        for (int f = c; f < kBatchFormations; f += 4) {
          std::string formation = "batch" + std::to_string(f);
          if (f % 2 == 0) {
            // Half the formations arrive as one INSERT ... SELECT.
            pqxx::work tx(*conn);
            // Priorities 0, 25 and 50, not preemptible: a full fleet must
            // not preempt its way through the storm, so every job runs
            // exactly once (preemption has its own tests,
            // preemption_e2e_test.cpp). The submitted half has priority 50:
            // nothing here outranks it.
            tx.exec_params(
                "insert into pgfleet.jobs (formation, command, cpu, memory, priority, preemptible)"
                " select $1, array['sh', '-c', 'exit 0'], 100, 32, (g % 3) * 25, false from "
                "generate_series(1, $2) g",
                formation, kJobsPerFormation);
            tx.commit();
          } else {
            // The other half one row per transaction, through pgfleet.submit.
            for (int j = 0; j < kJobsPerFormation; ++j) {
              pqxx::work tx(*conn);
              tx.exec_params("select pgfleet.submit(array['true'], $1, 100, 32)", formation);
              tx.commit();
            }
          }
        }
      });
    }
    // Scale the services up and down while the batch storm runs.
    std::thread scaler([this] {
      auto conn = db_.Connect();
      for (int replicas : {4, 1, 3, 0, 3}) {
        std::this_thread::sleep_for(700ms);
        for (int s = 0; s < kServices; ++s) {
          pqxx::work tx(*conn);
          if (s % 2 == 0) {
            tx.exec_params("select pgfleet.scale($1, $2)", "svc" + std::to_string(s), replicas);
          } else {
            tx.exec_params("update pgfleet.formations set replicas = $2 where name = $1",
                           "svc" + std::to_string(s), replicas);
          }
          tx.commit();
        }
      }
    });
    for (auto& t : clients) t.join();
    scaler.join();
  }

  void ExpectEverythingConsistent() {
    const int total = kBatchFormations * kJobsPerFormation;
    ASSERT_TRUE(WaitFor(
        [&] {
          return db_.Count(
                     "select count(*) from pgfleet.jobs where formation like 'batch%' and state = "
                     "'succeeded'") == total;
        },
        300s))
        << db_.Scalar(
               "select string_agg(state || ':' || n, ', ') from (select state, count(*) n from "
               "pgfleet.jobs"
               " where formation like 'batch%' group by state) x");
    // Each service formation settles at exactly 3 running replicas, nothing else live.
    ASSERT_TRUE(WaitFor(
        [&] {
          return db_.Count(
                     "select count(*) from pgfleet.jobs where formation like 'svc%' and state = "
                     "'running'"
                     " and desired_state = 'run'") == 3 * kServices &&
                 db_.Count(
                     "select count(*) from pgfleet.jobs where formation like 'svc%'"
                     " and state in ('pending', 'assigned', 'running') and not (state = 'running' "
                     "and desired_state = 'run')") == 0;
        },
        60s))
        << db_.Scalar(
               "select string_agg(formation || ' ' || state || '/' || desired_state || ':' || n, "
               "', ') from ("
               "select formation, state, desired_state, count(*) n from pgfleet.jobs where "
               "formation like 'svc%'"
               " group by 1, 2, 3 order by 1, 2, 3) x");
    for (int s = 0; s < kServices; ++s) {
      EXPECT_EQ(3, db_.Count("select count(*) from pgfleet.jobs where formation = 'svc" +
                             std::to_string(s) + "' and state = 'running'"));
    }
    StopSampler();
    EXPECT_GT(samples_, 10);
    EXPECT_EQ(0, overcommit_samples_.load());
    EXPECT_EQ(0, drift_samples_.load())
        << "allocated resources differed from the sum over live jobs";
    // Exactly one running event per attempt; no attempt assigned twice.
    EXPECT_EQ(0, db_.AttemptsWithRepeated("running"));
    EXPECT_EQ(0, db_.AttemptsWithRepeated("assigned"));
    // Every batch job ran exactly once: one attempt, one running event.
    EXPECT_EQ(
        0, db_.Count(
               "select count(*) from pgfleet.jobs where formation like 'batch%' and attempt <> 1"));
    EXPECT_EQ(
        total,
        db_.Count("select count(*) from pgfleet.job_events e join pgfleet.jobs j on j.id = e.job_id"
                  " where j.formation like 'batch%' and e.kind = 'running'"));
    // Final accounting equals the sum over live jobs.
    EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.allocation_drift"));
    EXPECT_EQ(3 * kServices * 50, db_.Count("select sum(cpu_allocated) from pgfleet.hosts"));
    // Every scheduler took part.
    EXPECT_EQ(3, db_.Count("select count(*) from pgfleet.schedulers"));
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  std::thread sampler_;
  std::atomic<bool> stop_sampler_{false};
  std::atomic<int> samples_{0}, overcommit_samples_{0}, drift_samples_{0};
};

TEST_F(ConcurrencyTest, ThreeSchedulersUnderAStormKeepEveryInvariant) {
  StartSampler();
  SubmitEverythingConcurrently();
  ExpectEverythingConsistent();
  StopSampler();
}

TEST_F(ConcurrencyTest, SchedulerKilledWithSigkillMidRunLeavesNothingHalfDone) {
  StartSampler();
  long long done_at_kill = -1;
  std::thread killer([this, &done_at_kill] {
    // Kill s2 while it is busy, then bring it back.
    WaitFor(
        [&] {
          return db_.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") > 300;
        },
        60s);
    cluster_->processes()[1]->Kill9();
    done_at_kill = db_.Count("select count(*) from pgfleet.jobs where state = 'succeeded'");
    std::this_thread::sleep_for(1s);
    cluster_->StartScheduler("s2");  // same id, as a supervisor would restart it
  });
  SubmitEverythingConcurrently();
  killer.join();
  EXPECT_GT(done_at_kill, 0);
  EXPECT_LT(done_at_kill, kBatchFormations * kJobsPerFormation) << "the kill must land mid-run";
  ExpectEverythingConsistent();
  StopSampler();
}

}  // namespace
}  // namespace pgfleet::testing
