// hostd's side of fencing and database outages, with real processes:
//   - a host declared lost that comes back re-registers as a new generation
//     and kills its superseded attempt (the whole process group); its stale
//     reports change nothing;
//   - a host cut off from the database for longer than --host-ttl stops its
//     jobs by itself, and re-registers and reports once the database is back;
//   - a PostgreSQL restart mid-run: jobs keep running, their reports wait in
//     hostd and all arrive after the reconnect.
// The outage tests stop and start a PostgreSQL of their own (PrivatePostgres),
// never the shared one, so they can run beside other tests.

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "core/net/http.h"
#include "core/util/text.h"
#include "hostd/attempt/attempt_dir.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A job with a child in its process group: both must die when it is killed.
const char* kJobWithChild = "sleep 600 & echo $! > child.pid; wait";

// The same process as when first seen, and not a zombie (killed jobs whose
// parent died are reparented to this test, a subreaper, and wait to be reaped).
bool Alive(pid_t pid, int64_t start_time) {
  if (start_time <= 0 || hostd::attempt::ProcStartTime(pid) != start_time) return false;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

// Shims outlive the hostd that started them; as a child subreaper the test
// inherits (and reaps) them instead of leaving zombies to an init that may not.
void ReapOrphans(std::chrono::milliseconds patience) {
  auto deadline = Clock::now() + patience;
  while (true) {
    pid_t r = waitpid(-1, nullptr, WNOHANG);
    if (r < 0) return;
    if (r == 0) {
      if (Clock::now() > deadline) return;
      std::this_thread::sleep_for(20ms);
    }
  }
}

// The running job's main process and the child it started, as seen now.
struct JobProcs {
  pid_t pid = 0, child = 0;
  int64_t pid_start = -1, child_start = -1;
  bool AnyAlive() const { return Alive(pid, pid_start) || Alive(child, child_start); }
};

class HostdFencingBase : public ::testing::Test {
 protected:
  void SetUp() override { prctl(PR_SET_CHILD_SUBREAPER, 1); }
  void TearDown() override {
    if (HasFailure() && cluster_) std::cerr << cluster_->Logs();
    cluster_.reset();
    db_.reset();
    pg_.reset();
    ReapOrphans(3s);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
  }
  std::string Job(const std::string& id, const std::string& column) {
    return db_->Scalar("select " + column + " from pgfleet.jobs where id = " + id);
  }
  long long Generation(const std::string& host) {
    return db_->Count("select generation from pgfleet.hosts where id = '" + host + "'");
  }
  // Waits for the job to run and for the child its shell wrote down.
  JobProcs Running(const std::string& id, const std::string& host, int attempt) {
    JobProcs p;
    EXPECT_TRUE(WaitFor(
        [&] {
          return Job(id, "state") == "running" && Job(id, "attempt") == std::to_string(attempt);
        },
        30s))
        << Job(id, "state") << "\n"
        << cluster_->Logs();
    p.pid = std::stoi(Job(id, "pid"));
    p.pid_start = hostd::attempt::ProcStartTime(p.pid);
    std::string file =
        cluster_->dir() + "/" + host + "/jobs/" + id + "-" + std::to_string(attempt) + "/work/child.pid";
    EXPECT_TRUE(WaitFor(
        [&] {
          std::ifstream f(file);
          return static_cast<bool>(f >> p.child);
        },
        10s))
        << file;
    p.child_start = hostd::attempt::ProcStartTime(p.child);
    EXPECT_TRUE(Alive(p.pid, p.pid_start));
    EXPECT_TRUE(Alive(p.child, p.child_start));
    return p;
  }

  std::unique_ptr<PrivatePostgres> pg_;
  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<Cluster> cluster_;
};

class HostdFencingTest : public HostdFencingBase {};

TEST_F(HostdFencingTest, HostDeclaredLostComesBackAsANewGenerationAndKillsItsSupersededAttempt) {
  db_ = std::make_unique<TestDatabase>();
  cluster_ = std::make_unique<Cluster>(*db_);
  cluster_->StartScheduler("s1");
  Process& host = cluster_->StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  std::string id = db_->Scalar("select pgfleet.submit(array['sh', '-c', '" +
                               std::string(kJobWithChild) + "'], max_attempts => 3)");
  JobProcs first = Running(id, "h1", 1);
  ASSERT_FALSE(HasFailure());
  long long gen = Generation("h1");

  // Freeze hostd (no heartbeats, no reports) and do what the scheduler's
  // sweep does to a lost host: mark it lost, report its attempt lost, which
  // requeues the job as a new attempt.
  host.Signal(SIGSTOP);
  db_->Scalar("update pgfleet.hosts set state = 'lost' where id = 'h1'");
  EXPECT_EQ("t", db_->Scalar("select accepted from pgfleet.report_jobs('h1', " +
                             std::to_string(gen) + ", '[{\"job\": " + id +
                             ", \"attempt\": 1, \"kind\": \"lost\", \"error\": \"test\"}]')"));
  EXPECT_EQ("pending", Job(id, "state"));
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(first.AnyAlive()) << "nothing kills the attempt while hostd is frozen";
  host.Signal(SIGCONT);

  // Back: the heartbeat says "lost", hostd registers again (generation + 1)
  // and its reconcile kills attempt 1, the shell and its child alike.
  ASSERT_TRUE(WaitFor([&] { return Generation("h1") == gen + 1; }, 15s)) << cluster_->Logs();
  ASSERT_TRUE(WaitFor([&] { return !first.AnyAlive(); }, 10s))
      << "superseded attempt still alive: pid " << first.pid << " "
      << Alive(first.pid, first.pid_start) << ", child " << first.child << " "
      << Alive(first.child, first.child_start) << "\n"
      << cluster_->Logs();
  EXPECT_EQ("up", db_->Scalar("select state from pgfleet.hosts where id = 'h1'"));

  // The scheduler places attempt 2 (here, the host being up again); it runs
  // with a new process, and attempt 1's exit report was rejected as stale.
  JobProcs second = Running(id, "h1", 2);
  EXPECT_NE(first.pid, second.pid);
  ASSERT_TRUE(WaitFor(
      [&] { return host.Log().find("attempt=1 report exited rejected") != std::string::npos; },
      10s))
      << host.Log();
  std::this_thread::sleep_for(1s);  // any further stale report would have landed by now
  EXPECT_EQ("running", Job(id, "state"));
  EXPECT_EQ("2", Job(id, "attempt"));
  EXPECT_EQ("", Job(id, "exit_code"));
  EXPECT_EQ("0", Job(id, "failures"));
  // Attempt 1's story ends with the lost the "scheduler" wrote: nothing from its exit.
  EXPECT_EQ("assigned,running,lost",
            db_->Scalar("select string_agg(kind, ',' order by id) from pgfleet.job_events where "
                        "job_id = " +
                        id + " and attempt = 1"));
  EXPECT_EQ(1, db_->Count("select count(*) from pgfleet.job_events where kind = 'running' and "
                          "job_id = " +
                          id + " and attempt = 2"));
  EXPECT_EQ(0, db_->Count("select count(*) from pgfleet.allocation_drift"));
}

TEST_F(HostdFencingTest, AttemptDispatchedBeforeItsAssignmentCommittedIsReportedOnceItIs) {
  // A scheduler that dispatches an assignment it then rolls back, and later
  // assigns the same attempt for real: hostd already ran it (at most once per
  // job and attempt), its reports were rejected, so it reports them again
  // when the database finally says the attempt is assigned here.
  db_ = std::make_unique<TestDatabase>();
  cluster_ = std::make_unique<Cluster>(*db_);
  Process& host = cluster_->StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  std::string id = db_->Scalar("select pgfleet.submit(array['sh', '-c', 'echo early'], 'manual')");
  httplib::Client c(db_->Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
  c.set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
  auto res = c.Post("/v1/jobs",
                    SignDispatch(*db_, "h1",
                                 "{\"jobs\":[{\"job\":" + id +
                                     ",\"attempt\":1,\"spec\":{\"command\":[\"sh\",\"-c\","
                                     "\"echo early\"],\"privileged\":true}}]}"),
                    "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(200, res->status) << res->body;
  ASSERT_TRUE(
      WaitFor([&] { return host.Log().find("report exited rejected") != std::string::npos; }, 10s))
      << host.Log();
  EXPECT_EQ("pending", Job(id, "state"));
  db_->Scalar("select count(*) from pgfleet.assign_jobs('[{\"job\": " + id +
              ", \"host\": \"h1\"}]')");
  EXPECT_EQ("1", Job(id, "attempt"));
  // What the database learns is what really happened: the attempt finished
  // before its first rejected report, or the rejection killed it first (the
  // attempt was not assigned then: fencing). Either way it is reported now.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto state = Job(id, "state");
        return state == "succeeded" || state == "failed";
      },
      15s))
      << host.Log();
  const std::string output = util::ReadFile(cluster_->dir() + "/h1/jobs/" + id + "-1/output.log");
  if (Job(id, "state") == "succeeded") {
    EXPECT_EQ("early\n", Job(id, "output_tail"));
    EXPECT_EQ("early\n", output);
  } else {
    EXPECT_EQ("9", Job(id, "signal")) << host.Log();
    EXPECT_EQ(output, Job(id, "output_tail"));
  }
  EXPECT_EQ("1", Job(id, "attempt"));
  // It ran once: one running event, one attempt directory.
  EXPECT_EQ(1, db_->Count("select count(*) from pgfleet.job_events where kind = 'running'"));
  EXPECT_EQ(std::vector<std::string>{id + "-1"}, Subdirs(cluster_->dir() + "/h1/jobs"));
}

TEST_F(HostdFencingTest, HostCutOffFromTheDatabaseStopsItsJobsAfterTheTtlAndReportsWhenBack) {
  pg_ = std::make_unique<PrivatePostgres>();
  db_ = std::make_unique<TestDatabase>(pg_->admin_dsn(), true);
  cluster_ = std::make_unique<Cluster>(*db_);
  // No scheduler: nothing else may act on the job; the assignment is written
  // by hand and hostd's reconcile starts it.
  Process& host = cluster_->StartHost("h1", 4000, 4000, {"--host-ttl", "2"});
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  std::string id = db_->Scalar("select pgfleet.submit(array['sh', '-c', '" +
                               std::string(kJobWithChild) + "'], 'manual')");
  db_->Scalar("select count(*) from pgfleet.assign_jobs('[{\"job\": " + id +
              ", \"host\": \"h1\"}]')");
  JobProcs procs = Running(id, "h1", 1);
  ASSERT_FALSE(HasFailure());
  long long gen = Generation("h1");

  auto cut = Clock::now();
  pg_->Stop();
  // Not fenced early (unless stopping PostgreSQL itself took most of the fence
  // time, as on an overloaded machine).
  if (Clock::now() - cut < 1s) {
    EXPECT_TRUE(procs.AnyAlive());
  }
  // Fenced by hostd itself: SIGKILL to the whole job once no heartbeat has
  // succeeded for the TTL less its margin (2 s - 0.5 s), not before.
  ASSERT_TRUE(WaitFor([&] { return !procs.AnyAlive(); }, 6s)) << host.Log();
  double after = std::chrono::duration<double>(Clock::now() - cut).count();
  EXPECT_GT(after, 0.8);
  EXPECT_LT(after, 3.0);
  std::this_thread::sleep_for(1500ms);  // the database stays away past the TTL
  pg_->Start();

  // Back: a new generation, then the buffered report. The fence killed the
  // attempt, not the job's own failure: it was lost with its host, and the job
  // waits for a new attempt (the host-loss rule), its attempts unspent.
  ASSERT_TRUE(WaitFor([&] { return Generation("h1") > gen; }, 20s)) << host.Log();
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "pending"; }, 15s))
      << Job(id, "state") << "\n"
      << host.Log();
  EXPECT_EQ("1", Job(id, "host_losses"));
  EXPECT_EQ("0", Job(id, "failures"));
  EXPECT_NE(std::string::npos, Job(id, "error").find("self-fenced")) << Job(id, "error");
  EXPECT_EQ(1, db_->Count("select count(*) from pgfleet.job_events where kind = 'lost' and "
                          "detail like '%self-fenced%' and job_id = " +
                          id));
  EXPECT_EQ("up", db_->Scalar("select state from pgfleet.hosts where id = 'h1'"));
  EXPECT_EQ(1, db_->Count("select count(*) from pgfleet.job_events where kind = 'running'"));
  EXPECT_EQ(0, db_->Count("select count(*) from pgfleet.allocation_drift"));
  // Logged once per state change, not per retry.
  EXPECT_TRUE(
      WaitFor([&] { return host.Log().find("self-fence lifted") != std::string::npos; }, 5s));
  std::string log = host.Log();
  EXPECT_EQ(1u, Occurrences(log, "no new ones until the database is back")) << log;
  EXPECT_EQ(1u, Occurrences(log, "self-fence lifted")) << log;
  EXPECT_LE(Occurrences(log, "database step failed"), 2u) << log;
  EXPECT_LE(Occurrences(log, "database unreachable") + Occurrences(log, "connection lost"), 2u)
      << log;

  // And new work runs again.
  std::string next = db_->Scalar("select pgfleet.submit(array['true'], 'manual')");
  db_->Scalar("select count(*) from pgfleet.assign_jobs('[{\"job\": " + next +
              ", \"host\": \"h1\"}]')");
  EXPECT_TRUE(WaitFor([&] { return Job(next, "state") == "succeeded"; }, 15s)) << host.Log();
}

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

TEST_F(HostdFencingTest, PostgresRestartMidRunLosesNoReport) {
  pg_ = std::make_unique<PrivatePostgres>();
  db_ = std::make_unique<TestDatabase>(pg_->admin_dsn(), true);
  cluster_ = std::make_unique<Cluster>(*db_);
  cluster_->StartScheduler("s1");
  Process& host = cluster_->StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  db_->Scalar(
      "insert into pgfleet.jobs (command, formation, cpu, memory)"
      " select array['sh', '-c', 'sleep 3; echo done-' || g], 'outage', 100, 32"
      "   from generate_series(1, 20) g");
  ASSERT_TRUE(WaitFor(
      [&] { return db_->Count("select count(*) from pgfleet.jobs where state = 'running'") == 20; },
      30s))
      << cluster_->Logs();
  std::vector<std::pair<pid_t, int64_t>> procs;
  {
    auto c = db_->Connect();
    pqxx::work tx(*c);
    for (const auto& r : tx.exec("select pid from pgfleet.jobs")) {
      pid_t pid = r[0].as<int>();
      procs.emplace_back(pid, hostd::attempt::ProcStartTime(pid));
    }
  }

  pg_->Stop();
  for (auto& [pid, start] : procs) EXPECT_TRUE(Alive(pid, start)) << pid;
  // Every job finishes while the database is down; hostd keeps the reports.
  EXPECT_TRUE(WaitFor(
      [&] {
        for (auto& [pid, start] : procs) {
          if (Alive(pid, start)) return false;
        }
        return true;
      },
      8s));
  std::this_thread::sleep_for(500ms);
  pg_->Start();

  ASSERT_TRUE(WaitFor(
      [&] {
        return db_->Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == 20;
      },
      30s))
      << db_->Scalar(
             "select string_agg(state || ':' || n, ', ') from (select state, count(*) n"
             " from pgfleet.jobs group by state) x")
      << "\n"
      << cluster_->Logs();
  EXPECT_EQ(0, db_->Count("select count(*) from (select job_id from pgfleet.job_events where"
                          " kind = 'running' group by job_id having count(*) <> 1) x"));
  EXPECT_EQ(20, db_->Count("select count(distinct job_id) from pgfleet.job_events where kind = "
                           "'running'"));
  EXPECT_EQ(0, db_->Count("select count(*) from pgfleet.jobs where attempt <> 1"));
  EXPECT_EQ(0, db_->Count("select count(*) from pgfleet.job_events where kind = 'lost'"));
  EXPECT_EQ(20, db_->Count("select count(*) from pgfleet.jobs where output_tail = 'done-' ||"
                           " substr(command[3], length('sleep 3; echo done-') + 1) || E'\\n'"));
  EXPECT_EQ(0, db_->Count("select count(*) from pgfleet.allocation_drift"));
  std::string log = host.Log();
  EXPECT_LE(Occurrences(log, "database unreachable") + Occurrences(log, "connection lost"), 2u)
      << log;
  EXPECT_EQ(0u, Occurrences(log, "self-fenced")) << log;
}

// An asynchronous standby promoted after the primary accepted a job's end,
// or a restore: the database shows the attempt running again, though it
// ended on the host and the host delivered its end. The host reports the
// outcome again at its next reconcile; the job does not stay running forever.
TEST_F(HostdFencingTest, AnEndTheDatabaseLostIsReportedAgain) {
  db_ = std::make_unique<TestDatabase>();
  cluster_ = std::make_unique<Cluster>(*db_);
  cluster_->StartScheduler("s1");
  Process& host = cluster_->StartHost("h1", 1000, 1000);
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  std::string id = db_->Scalar("select pgfleet.submit(array['sh', '-c', 'exit 3'])");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "failed"; }, 20s)) << cluster_->Logs();

  // The database as a standby that never saw the end would have it.
  std::string state = db_->Scalar(
      "alter table pgfleet.jobs disable trigger jobs_check_transition;"
      "update pgfleet.hosts h set cpu_allocated = h.cpu_allocated + j.cpu,"
      "  memory_allocated = h.memory_allocated + j.memory from pgfleet.jobs j"
      "  where j.id = " +
      id +
      " and h.id = j.host_id;"
      "update pgfleet.jobs set state = 'running', exit_code = null, finished_at = null,"
      "  error = null, output_tail = null where id = " +
      id +
      ";"
      "delete from pgfleet.job_events where job_id = " +
      id +
      " and kind not in ('created', 'assigned', 'running');"
      "alter table pgfleet.jobs enable trigger jobs_check_transition;"
      "select state from pgfleet.jobs where id = " +
      id);
  // (Read in the same transaction: the host's next reconcile may correct it
  // within a second, before a separate read.)
  ASSERT_EQ("running", state);

  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "failed"; }, 20s)) << host.Log();
  EXPECT_EQ("3", Job(id, "exit_code"));
  EXPECT_EQ("1", Job(id, "attempt"));
  EXPECT_NE(std::string::npos, host.Log().find("the database lost it")) << host.Log();
  EXPECT_EQ(1, db_->Count("select count(*) from pgfleet.job_events where kind = 'running'"));
  EXPECT_EQ(0, db_->Count("select count(*) from pgfleet.allocation_drift"));
  EXPECT_EQ(0, db_->Count("select cpu_allocated from pgfleet.hosts where id = 'h1'"));
}

}  // namespace
}  // namespace pgfleet::testing
