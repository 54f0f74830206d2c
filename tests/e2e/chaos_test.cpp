// Chaos, bounded to a few minutes: 2 schedulers, 3 hosts, a few hundred mixed
// jobs (short batch, long batch, failing batch, service replicas), random
// kill -9 of schedulers and hosts with restarts, hostile HTTP requests against
// the hosts throughout, and half way through one database fault: a PostgreSQL
// restart, or (second test) the primary killed and its synchronous standby
// promoted, every daemon given both servers in one multi-host DSN.
// Afterwards the invariants are checked from the database and from the hosts'
// processes, and the counts printed.

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "core/util/text.h"
#include "hostile_traffic.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr double kTtlSeconds = 3;

// Live job processes of this test, read from /proc: job id -> attempts seen.
// The process driver gives each job PGFLEET_JOB_ID and PGFLEET_ATTEMPT, and
// runs it in its attempt directory under the cluster's dir.
std::map<long, std::set<int>> LiveAttempts(const std::string& cluster_dir) {
  std::map<long, std::set<int>> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (auto* e = readdir(d)) {
    std::string pid = e->d_name;
    if (pid.empty() || !isdigit(static_cast<unsigned char>(pid[0]))) continue;
    char cwd[4096];
    ssize_t n = readlink(("/proc/" + pid + "/cwd").c_str(), cwd, sizeof(cwd) - 1);
    if (n <= 0) continue;
    cwd[n] = '\0';
    if (std::string(cwd).rfind(cluster_dir, 0) != 0) continue;
    std::string stat;
    try {
      stat = util::ReadFile("/proc/" + pid + "/stat");
      auto close = stat.rfind(')');
      if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z') continue;
      std::string env = util::ReadFile("/proc/" + pid + "/environ");
      long job = -1;
      int attempt = -1;
      size_t pos = 0;
      while (pos < env.size()) {
        size_t end = env.find('\0', pos);
        if (end == std::string::npos) end = env.size();
        std::string kv = env.substr(pos, end - pos);
        if (kv.rfind("PGFLEET_JOB_ID=", 0) == 0) job = std::stol(kv.substr(15));
        if (kv.rfind("PGFLEET_ATTEMPT=", 0) == 0) attempt = std::stoi(kv.substr(16));
        pos = end + 1;
      }
      if (job > 0 && attempt > 0) out[job].insert(attempt);
    } catch (const std::exception&) {
    }
  }
  closedir(d);
  return out;
}

// Queries through a DSN of the test's choosing (after a failover, the
// multi-host one finds the new primary), each on a new connection.
class Sql {
 public:
  explicit Sql(std::string dsn) : dsn_(std::move(dsn)) {}
  std::string Scalar(const std::string& sql) const {
    pqxx::connection c(dsn_);
    pqxx::work tx(c);
    auto r = tx.exec(sql);
    tx.commit();
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
  }
  long long Count(const std::string& sql) const { return std::stoll(Scalar(sql)); }
  // (job, attempt) pairs with more than one `kind` event: an attempt placed or started twice.
  long long AttemptsWithRepeated(const std::string& kind) const {
    return Count(
        "select count(*) from (select job_id, attempt from pgfleet.job_events where kind = '" +
        kind + "' group by 1, 2 having count(*) > 1) x");
  }

 private:
  std::string dsn_;
};

enum class DatabaseFault { kRestart, kFailover };

void RunChaos(DatabaseFault fault) {
  PrivatePostgres pg;
  // Declared before the database so it outlives it (synchronous replication
  // would make dropping the database wait for a standby that is gone).
  std::unique_ptr<PrivatePostgres> standby;
  TestDatabase db(pg.admin_dsn(), true);
  std::string dsn = db.dsn();
  if (fault == DatabaseFault::kFailover) {
    standby = std::make_unique<PrivatePostgres>(PrivatePostgres::StandbyOf{pg});
    ASSERT_TRUE(pg.MakeReplicationSynchronous());
    dsn = pg.FailoverDsn(*standby, db.name());
  }
  Sql sql(dsn);
  Cluster cluster(db);
  std::string ttl = std::to_string(kTtlSeconds);
  std::vector<std::string> sched_args = {"--host-ttl", ttl, "--db", dsn};
  std::vector<std::string> host_args = {"--host-ttl", ttl, "--db", dsn};
  // Process slots: 0,1 schedulers; 2,3,4 hosts. Restarts append new Process
  // objects; `current` maps each daemon to its live Process.
  std::vector<std::string> names = {"s1", "s2", "h1", "h2", "h3"};
  std::map<std::string, Process*> current;
  for (int i = 0; i < 2; ++i) current[names[i]] = &cluster.StartScheduler(names[i], sched_args);
  for (int i = 2; i < 5; ++i)
    current[names[i]] = &cluster.StartHost(names[i], 2000, 4000, host_args);
  ASSERT_TRUE(cluster.WaitHostsUp(3)) << cluster.Logs();
  auto restart = [&](const std::string& name) {
    if (name[0] == 's')
      current[name] = &cluster.StartScheduler(name, sched_args);
    else
      current[name] = &cluster.StartHost(name, 2000, 4000, host_args);
  };

  // The work: 200 short, 40 long, 20 failing (2 attempts each), 3 services x 2.
  sql.Scalar(
      "insert into pgfleet.jobs (formation, command, cpu, memory, max_attempts)"
      " select 'short' || (g % 5), array['sh', '-c', 'exit 0'], 100, 32, 3 from generate_series(1, "
      "200) g");
  sql.Scalar(
      "insert into pgfleet.jobs (formation, command, cpu, memory, max_attempts)"
      " select 'long', array['sleep', (2 + g % 5)::text], 100, 32, 3 from generate_series(1, 40) "
      "g");
  sql.Scalar(
      "insert into pgfleet.jobs (formation, command, cpu, memory, max_attempts)"
      " select 'failing', array['sh', '-c', 'exit 1'], 100, 32, 2 from generate_series(1, 20) g");
  for (int s = 0; s < 3; ++s) {
    sql.Scalar(
        "insert into pgfleet.formations (name, kind, replicas, command, cpu, memory)"
        " values ('svc" +
        std::to_string(s) + "', 'service', 2, array['sleep', '600'], 100, 32)");
  }

  // Watch the hosts: two live attempts of one job for longer than the TTL
  // (plus the reconcile and stop margins) is a violation.
  std::atomic<bool> stop{false};
  std::atomic<int> violations{0};
  std::mutex mu;
  std::string violation_detail;
  std::thread watcher([&] {
    std::map<long, Clock::time_point> doubled_since;
    while (!stop) {
      auto live = LiveAttempts(cluster.dir());
      auto now = Clock::now();
      for (auto& [job, attempts] : live) {
        if (attempts.size() < 2) {
          doubled_since.erase(job);
          continue;
        }
        auto [it, fresh] = doubled_since.emplace(job, now);
        if (!fresh && now - it->second >
                          std::chrono::milliseconds(static_cast<int>(kTtlSeconds * 1000) + 6000)) {
          ++violations;
          std::lock_guard<std::mutex> lock(mu);
          violation_detail += "job " + std::to_string(job) + " had " +
                              std::to_string(attempts.size()) + " live attempts for over TTL+6s; ";
          doubled_since.erase(job);
        }
      }
      for (auto it = doubled_since.begin(); it != doubled_since.end();) {
        it = live.count(it->first) ? std::next(it) : doubled_since.erase(it);
      }
      std::this_thread::sleep_for(200ms);
    }
  });

  // Hostile requests against whichever hosts are up, all through the chaos.
  HostileTraffic hostile(
      [&] {
        std::vector<HostileTarget> targets;
        try {
          std::istringstream urls(sql.Scalar(
              "select string_agg(api_url, ' ') from pgfleet.hosts where state <> 'lost'"));
          for (std::string url; urls >> url;) targets.push_back({PortOf(url), ""});
        } catch (const std::exception&) {  // PostgreSQL is restarting
        }
        return targets;
      },
      util::Trim(util::ReadFile(cluster.token_file())));

  // Chaos: a fixed number of kill rounds (a slow machine takes longer, it
  // does not see less chaos), the database fault half way through.
  constexpr int kKillRounds = 8;
  std::mt19937 rng(20261121);
  int kills = 0, restarts = 0, pg_restarts = 0, failovers = 0;
  while (kills < kKillRounds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500 + rng() % 2000));
    if (kills == kKillRounds / 2 && pg_restarts + failovers == 0) {
      if (fault == DatabaseFault::kRestart) {
        pg.Restart();
        ++pg_restarts;
      } else {
        pg.Crash();
        standby->Promote();
        ++failovers;
      }
      continue;
    }
    std::string victim = names[rng() % names.size()];
    current[victim]->Kill9();
    ++kills;
    // Hosts stay down past the TTL half of the time, so they are declared lost.
    auto down = victim[0] == 'h' && rng() % 2
                    ? std::chrono::milliseconds(static_cast<int>(kTtlSeconds * 1000) + 1500)
                    : std::chrono::milliseconds(300 + rng() % 700);
    std::this_thread::sleep_for(down);
    restart(victim);
    ++restarts;
  }
  // Through `sql`: after a failover only the multi-host DSN finds the database.
  bool hosts_up = WaitFor(
      [&] {
        try {
          return sql.Count(
                     "select count(*) from pgfleet.host_status where state = 'up' and "
                     "alive") >= 3;
        } catch (const std::exception&) {
          return false;
        }
      },
      30s);

  // Let the cluster settle: batch work final, services at their replicas.
  bool settled =
      hosts_up &&
      WaitFor(
          [&] {
            return sql.Count(
                       "select count(*) from pgfleet.jobs j join pgfleet.formations f on f.name = "
                       "j.formation"
                       " where f.kind = 'batch' and j.state not in ('succeeded', 'failed', "
                       "'cancelled')") == 0 &&
                   sql.Count(
                       "select count(*) from pgfleet.jobs where formation like 'svc%' and state = "
                       "'running'"
                       " and desired_state = 'run'") == 6;
          },
          180s);
  stop = true;
  watcher.join();
  hostile.Stop();
  ASSERT_TRUE(hosts_up) << cluster.Logs();
  long long jobs = sql.Count("select count(*) from pgfleet.jobs");
  long long succeeded = sql.Count("select count(*) from pgfleet.jobs where state = 'succeeded'");
  long long lost_events = sql.Count("select count(*) from pgfleet.job_events where kind = 'lost'");
  std::cerr << "chaos: jobs=" << jobs << " succeeded=" << succeeded << " kills=" << kills
            << " restarts=" << restarts << " postgres_restarts=" << pg_restarts
            << " failovers=" << failovers << " lost_events=" << lost_events
            << " violations=" << violations.load() << " hostile_requests=" << hostile.sent()
            << "\n";
  ASSERT_TRUE(settled)
      << sql.Scalar(
             "select string_agg(formation || ':' || state || ':' || n, ', ') from (select"
             " formation, state, count(*) n from pgfleet.jobs group by 1, 2 order by 1, 2) x")
      << cluster.Logs();
  EXPECT_EQ(0, violations.load()) << violation_detail;
  // Every job finished, or is a service replica running, or is pending with a reason.
  EXPECT_EQ(
      0, sql.Count("select count(*) from pgfleet.jobs where state = 'pending' and error is null"));
  // Short and long work succeeded unless lost with 3 hosts (then it says so).
  EXPECT_EQ(
      0, sql.Count(
             "select count(*) from pgfleet.jobs where formation in ('long', 'short0', 'short1', "
             "'short2',"
             " 'short3', 'short4') and state <> 'succeeded' and error not like '%lost 3 times%'"));
  // Failing jobs ran their 2 attempts' worth of failures and say why.
  EXPECT_EQ(
      20,
      sql.Count("select count(*) from pgfleet.jobs where formation = 'failing' and state = 'failed'"
                " and (error = 'exit code 1' or error like '%lost 3 times%')"));
  // No attempt started twice.
  EXPECT_EQ(0, sql.AttemptsWithRepeated("running"));
  EXPECT_EQ(0, sql.AttemptsWithRepeated("assigned"));
  // Allocated resources equal the sum over live jobs.
  EXPECT_EQ(0, sql.Count("select count(*) from pgfleet.allocation_drift"));
  // On the hosts: at most one live attempt per job now, and it is the current one.
  auto live = LiveAttempts(cluster.dir());
  for (auto& [job, attempts] : live) {
    EXPECT_EQ(1u, attempts.size()) << "job " << job;
    EXPECT_EQ(sql.Scalar("select attempt from pgfleet.jobs where id = " + std::to_string(job)),
              std::to_string(*attempts.rbegin()))
        << "job " << job << " runs a superseded attempt";
  }
  if (fault == DatabaseFault::kFailover) {
    EXPECT_EQ("f", sql.Scalar("select pg_is_in_recovery()"));  // on the promoted standby
    // The cluster's clean-up asks the old primary, which is gone: stop the
    // services' processes here.
    for (auto& [job, attempts] : LiveAttempts(cluster.dir())) {
      std::string pid =
          sql.Scalar("select pid from pgfleet.jobs where id = " + std::to_string(job));
      if (!pid.empty() && std::stoi(pid) > 1) {
        kill(-std::stoi(pid), SIGKILL);
        kill(std::stoi(pid), SIGKILL);
      }
    }
  }
}

TEST(ChaosTest, KillsRestartsAndAPostgresRestartLoseNothingAndRunNothingTwice) {
  RunChaos(DatabaseFault::kRestart);
}

TEST(ChaosTest, KillsRestartsAndAFailoverToTheStandbyLoseNothingAndRunNothingTwice) {
  RunChaos(DatabaseFault::kFailover);
}

}  // namespace
}  // namespace pgfleet::testing
