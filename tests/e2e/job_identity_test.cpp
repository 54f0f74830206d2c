// A host's data outlives its database (reliability issue, item 2): a host
// keys what it keeps of an attempt by the job's uid (jobs.uid, made at
// insert, kept by backup and restore), so attempts it ran for another
// database, or for this one before a restore made job ids go backwards, are
// never taken for the new jobs that reuse their ids and attempt numbers.
// Before: every new job whose id and attempt matched a directory left by a
// job that was running when the machine died lost its attempt ("found no
// shim or exit record"), and a job matching a finished one was refused as
// "already" run.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "hostd/attempt/attempt_dir.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class JobIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Shims outlive the hostd that started them: as a child subreaper this
    // test inherits and reaps them.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    cluster_ = std::make_unique<Cluster>(db_);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs();
    cluster_.reset();
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
  std::string DataDir() const { return cluster_->dir() + "/h1"; }
  // Inserts n jobs running `command` (an SQL array literal) in db; their ids.
  static std::vector<std::string> Submit(const TestDatabase& db, int n,
                                         const std::string& command) {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) {
      ids.push_back(
          db.Scalar("insert into pgfleet.jobs (command) values (" + command + ") returning id"));
    }
    return ids;
  }
  static bool AllIn(const TestDatabase& db, const std::vector<std::string>& ids,
                    const std::string& state) {
    for (const auto& id : ids) {
      if (db.Scalar("select state from pgfleet.jobs where id = " + id) != state) return false;
    }
    return true;
  }
  // Every one ran once, as attempt 1, printed what it was asked to, and no
  // attempt of it was lost.
  static void ExpectRanOnceEach(const TestDatabase& db, const std::vector<std::string>& ids) {
    const bool failed_before = ::testing::Test::HasFailure();
    for (const auto& id : ids) {
      SCOPED_TRACE("job " + id);
      EXPECT_EQ("succeeded|1|new\n",
                db.Scalar("select state || '|' || attempt || '|' || coalesce(output_tail, '') "
                          "from pgfleet.jobs where id = " +
                          id));
      EXPECT_EQ(0, db.Count("select count(*) from pgfleet.job_events where kind = 'lost' and "
                            "job_id = " +
                            id));
      EXPECT_EQ(1, db.Count("select count(*) from pgfleet.job_events where kind = 'running' and "
                            "job_id = " +
                            id));
    }
    if (!failed_before && ::testing::Test::HasFailure()) {
      std::cerr << "events: "
                << db.Scalar("select string_agg(job_id || '/' || attempt || ' ' || kind || ' ' || "
                             "coalesce(detail, ''), E'\\n' order by id) from pgfleet.job_events")
                << "\n";
    }
  }
  // Each job as id:state:attempt:error, for failures.
  static std::string Jobs(const TestDatabase& db) {
    return db.Scalar(
        "select string_agg(id || ':' || state || ':' || attempt || ':' || coalesce(error, ''), ', "
        "') "
        "from pgfleet.jobs");
  }
  static std::string EchoNew() { return "'{echo,new}'"; }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(JobIdentityTest, AttemptsLeftByAMachineThatDiedAreNotTakenForAnotherDatabasesJobs) {
  cluster_->StartScheduler("s1");
  Process* host = &cluster_->StartHost("h1", 8000, 8000);
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  auto old_jobs = Submit(db_, 5, "'{sleep,600}'");
  ASSERT_TRUE(WaitFor([&] { return AllIn(db_, old_jobs, "running"); }, 30s)) << cluster_->Logs();

  // The machine dies: shims first (so nothing records an exit), then the
  // jobs, then hostd. The attempt directories stay, as on a real disk.
  for (const auto& id : old_jobs) {
    auto state = hostd::attempt::ReadState(DataDir() + "/jobs/" + id + "-1");
    ASSERT_TRUE(state.started) << id;
    kill(state.started->shim.pid, SIGKILL);
    kill(state.started->job.pid, SIGKILL);
  }
  host->Kill9();
  for (auto& p : cluster_->processes()) p->Stop();

  // The same host comes back on a new database (re-created, or another
  // cluster): job ids 1..5 and attempt 1 again.
  TestDatabase fresh;
  cluster_->StartScheduler("s2", {"--db", fresh.dsn()});
  cluster_->StartHost("h1", 8000, 8000, {"--db", fresh.dsn()});
  auto new_jobs = Submit(fresh, 5, EchoNew());
  EXPECT_EQ(old_jobs, new_jobs) << "the new database reuses the ids";
  ASSERT_TRUE(WaitFor([&] { return AllIn(fresh, new_jobs, "succeeded"); }, 60s))
      << Jobs(fresh) << cluster_->Logs();
  ExpectRanOnceEach(fresh, new_jobs);
  EXPECT_NE(std::string::npos, cluster_->Logs().find("another or a restored database"))
      << "hostd says why it set the old attempts aside";
  EXPECT_EQ(5u, Subdirs(DataDir() + "/stale").size()) << "set aside, not deleted";
}

TEST_F(JobIdentityTest, ARestoredDatabaseWhoseIdsGoBackwardsGetsItsJobsRunNotReplayed) {
  cluster_->StartScheduler("s1");
  cluster_->StartHost("h1", 8000, 8000);
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  auto before = Submit(db_, 5, "array['sh', '-c', 'echo before; exit 3']");
  ASSERT_TRUE(WaitFor([&] { return AllIn(db_, before, "failed"); }, 30s)) << cluster_->Logs();

  // Restored from a backup taken before those jobs: they are gone, and the
  // next ids are theirs again. The host keeps their attempts (and remembers
  // their outcomes) as it would.
  db_.Scalar(
      "delete from pgfleet.jobs; alter table pgfleet.jobs alter column id restart with 1; "
      "select 1");
  auto after = Submit(db_, 5, EchoNew());
  EXPECT_EQ(before, after) << "the restored database reuses the ids";
  ASSERT_TRUE(WaitFor([&] { return AllIn(db_, after, "succeeded"); }, 60s))
      << Jobs(db_) << cluster_->Logs();
  ExpectRanOnceEach(db_, after);
}

}  // namespace
}  // namespace pgfleet::testing
