// PostgreSQL frozen rather than gone: every daemon's backend is stopped with
// SIGSTOP (as a paused VM, or a backend stuck in the kernel, leaves it). The
// kernel still acknowledges every packet, so neither TCP keepalives nor the
// server's statement_timeout notice; the daemons' own deadline
// (core/db/deadline.h) must. While the old backends stay frozen, the daemons
// must drop them, reconnect and go on: the host keeps its lease (its running
// job is not fenced) and new jobs are placed and run. Once the backends
// resume they find their clients gone and end, and no attempt ran twice.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <sstream>
#include <thread>

#include "core/model/constants.h"
#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

std::vector<pid_t> Pids(const std::string& text) {
  std::vector<pid_t> out;
  std::istringstream in(text);
  for (pid_t p; in >> p;) out.push_back(p);
  return out;
}

// Resumes the backends however the test ends: a stopped backend left behind
// would hold its locks and its slot until the server stops.
struct Frozen {
  std::vector<pid_t> pids;
  void Thaw() {
    for (pid_t p : pids) kill(p, SIGCONT);
    pids.clear();
  }
  ~Frozen() { Thaw(); }
};

TEST(FrozenBackendTest, DaemonsLeaveStoppedBackendsReconnectAndRunNothingTwice) {
  TestDatabase db;
  Cluster cluster(db);
  cluster.StartScheduler("s1");
  // Default host TTL (10 s): hostd's deadline is a third of it, so it
  // reconnects and heartbeats well before it would fence itself.
  cluster.StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();

  auto r = cluster.Cli({"run", "--", "sleep", "300"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  std::string long_job = util::Trim(r.out);
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Scalar("select state from pgfleet.jobs where id = " + long_job) == "running";
      },
      30s))
      << cluster.Logs();
  std::string long_pid = db.Scalar("select pid from pgfleet.jobs where id = " + long_job);
  // Freeze the backends while the scheduler sleeps (it holds the idle lock
  // and waits for a NOTIFY or its tick), not while it still finishes the
  // job's dispatch: woken, its first query then goes out on its work
  // connection, whose deadline this test is about. (Frozen mid-dispatch, the
  // first blocked query may be on its listen connection: that deadline fires
  // instead, and the scheduler recovers the same way.)
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pg_locks where locktype = 'advisory'"
                   " and database = (select oid from pg_database"
                   "                  where datname = current_database())"
                   " and mode = 'ExclusiveLock' and granted and classid = " +
                   std::to_string(model::kLockClass) + " and objid = " +
                   std::to_string(static_cast<uint32_t>(model::kIdleLockKey))) == 1;
      },
      10s))
      << cluster.Logs();
  std::this_thread::sleep_for(300ms);

  // Every daemon connection of this database: the scheduler's two and the
  // host's one (this query's own backend is excluded; the test connects anew
  // for each query, so none of its later queries meets a frozen backend).
  Frozen frozen;
  frozen.pids =
      Pids(db.Scalar("select string_agg(pid::text, ' ') from pg_stat_activity"
                     " where datname = current_database() and pid <> pg_backend_pid()"
                     " and backend_type = 'client backend'"));
  ASSERT_GE(frozen.pids.size(), 3u) << "expected the scheduler's and the host's connections";
  for (pid_t p : frozen.pids) ASSERT_EQ(0, kill(p, SIGSTOP)) << "backend " << p;
  auto frozen_at = std::chrono::steady_clock::now();

  // Work submitted while the old backends are frozen runs on new connections.
  db.Scalar("insert into pgfleet.jobs (command) select array['true'] from generate_series(1, 10)");
  ASSERT_TRUE(WaitFor(
      [&] { return db.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == 10; },
      40s))
      << "jobs submitted during the freeze did not run\n"
      << cluster.Logs();
  double recovered_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen_at).count();
  std::cout << "frozen backends: " << frozen.pids.size()
            << " jobs run while frozen: 10 seconds_to_recover=" << recovered_s << "\n";
  std::string logs = cluster.Logs();
  EXPECT_NE(std::string::npos, logs.find("host=h1: the database has not answered")) << logs;
  EXPECT_NE(std::string::npos, logs.find("scheduler=s1 work connection: the database has not"))
      << logs;

  // The host kept its lease: the long job still runs as attempt 1, same process.
  EXPECT_EQ("running/1/" + long_pid,
            db.Scalar("select state || '/' || attempt || '/' || pid from pgfleet.jobs where id = " +
                      long_job))
      << cluster.Logs();
  EXPECT_FALSE(ProcessGone(long_pid));
  EXPECT_EQ("up", db.Scalar("select state from pgfleet.hosts where id = 'h1'"));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.job_events where kind = 'lost'"));

  // Resumed, the old backends find their clients gone and end.
  std::vector<pid_t> old = frozen.pids;
  frozen.Thaw();
  for (pid_t p : old) {
    EXPECT_TRUE(WaitFor([&] { return ProcessGone(std::to_string(p)); }, 20s))
        << "backend " << p << " still there after it was resumed";
  }

  // Everything still works after the thaw, and nothing ran twice.
  db.Scalar("insert into pgfleet.jobs (command) select array['true'] from generate_series(1, 5)");
  ASSERT_TRUE(WaitFor(
      [&] { return db.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == 15; },
      30s))
      << cluster.Logs();
  ASSERT_EQ(0, cluster.Cli({"stop", long_job}).exit_code);
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Scalar("select state from pgfleet.jobs where id = " + long_job) == "cancelled";
      },
      30s))
      << cluster.Logs();
  EXPECT_EQ(0, db.AttemptsWithRepeated("running"));
  EXPECT_EQ(0, db.AttemptsWithRepeated("assigned"));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.jobs where attempt > 1"));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.allocation_drift"));
}

}  // namespace
}  // namespace pgfleet::testing
