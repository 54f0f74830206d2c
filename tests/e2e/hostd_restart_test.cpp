// hostd restarts keep jobs running: each job runs under its own shim process
// (`pgfleet-hostd shim`), so kill -9 of hostd leaves the job and its pid
// alone, a restarted hostd re-attaches to it, and an exit that happens while
// hostd is down is reported with its real exit code once hostd is back.
// Real processes (PostgreSQL from scripts/test, pgfleet-schedulerd,
// pgfleet-hostd), for the process and the container driver.

#include <dirent.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "core/net/http.h"
#include "core/util/text.h"
#include "hostd/attempt/attempt_dir.h"
#include "hostd/drivers/container/cgroup.h"
#include "hostd/drivers/container/container.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

std::string Cmdline(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (char& c : s) c = c == '\0' ? ' ' : c;
  return s;
}

// The same process as when first seen (pid and start time both match), and
// not a zombie: job processes whose shim died are reparented to this test, a
// subreaper, and linger as zombies until it reaps them.
bool SameProcess(pid_t pid, int64_t start_time) {
  if (start_time <= 0 || hostd::attempt::ProcStartTime(pid) != start_time) return false;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// Shims (and the jobs of killed shims) outlive the hostd that started them;
// as a child subreaper this test inherits them when hostd dies, and reaps
// them at the end instead of leaving zombies to an init that may not.
void ReapOrphans(std::chrono::milliseconds patience) {
  auto deadline = std::chrono::steady_clock::now() + patience;
  while (true) {
    pid_t r = waitpid(-1, nullptr, WNOHANG);
    if (r < 0) return;  // ECHILD: nothing left
    if (r == 0) {
      if (std::chrono::steady_clock::now() > deadline) return;
      std::this_thread::sleep_for(20ms);
    }
  }
}

class HostdRestartTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (driver() == "container") {
      ASSERT_EQ(geteuid(), 0u) << "the container driver needs root (CI has it)";
    }
    // Unique per process: container cgroups (pgfleet/<host>/<job>-<attempt>)
    // of tests running side by side must never meet.
    host_ = "hr" + std::to_string(getpid());
    cluster_ = std::make_unique<Cluster>(db_);
    cluster_->StartScheduler("s1");
    StartHost();
    ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs() << ShimLog();
    cluster_.reset();  // kills the jobs the database knows, stops the daemons
    ReapOrphans(3s);
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    if (driver() == "container") RemoveHostCgroups();
  }
  // The per-host cgroup parent outlives a killed hostd (and one stopped while
  // its last job's shim was still tidying up), and a job whose shim was
  // killed leaves its (empty) cgroup: remove them.
  void RemoveHostCgroups() {
    for (const std::string& dir : HostCgroupDirs(host_)) {
      WaitFor(
          [&] {
            if (DIR* d = opendir(dir.c_str())) {
              while (dirent* e = readdir(d)) {
                std::string n = e->d_name;
                if (e->d_type == DT_DIR && n != "." && n != "..") rmdir((dir + "/" + n).c_str());
              }
              closedir(d);
            }
            return rmdir(dir.c_str()) == 0 || errno == ENOENT;
          },
          2s);
    }
  }

  // Directories of the cgroup at `path` under pgfleet/<host>/ ("" for the
  // per-host group itself), in every controller the container driver uses,
  // that exist now.
  std::vector<std::string> CgroupDirs(const std::string& path) const {
    std::vector<std::string> out;
    const hostd::CgroupSystem* sys = hostd::CgroupSystem::Get(nullptr);
    if (!sys) return out;
    for (const auto& c : sys->controllers()) {
      std::string dir =
          sys->Dir(c, hostd::HostCgroupPathFor(DataDir(), host_) + (path.empty() ? "" : "/" + path));
      struct stat st;
      if (stat(dir.c_str(), &st) == 0) out.push_back(dir);
    }
    return out;
  }
  static std::string Join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += s + " ";
    return out;
  }

  const std::string& driver() const { return GetParam(); }
  Process& StartHost() {
    host_proc_ = &cluster_->StartHost(host_, 4000, 4000, {"--driver", driver()});
    return *host_proc_;
  }
  std::string DataDir() const { return cluster_->dir() + "/" + host_; }
  std::string ShimLog() const {
    std::ifstream f(DataDir() + "/shim.log");
    return "---- shim.log\n" +
           std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  long long Generation() {
    return db_.Count("select coalesce((select generation from pgfleet.hosts where id = '" + host_ +
                     "'), 0)");
  }
  std::string Job(const std::string& id, const std::string& column) {
    return db_.Scalar("select " + column + " from pgfleet.jobs where id = " + id);
  }
  // The job as hostd's API reports it (after a restart: what it re-attached to).
  nlohmann::json ApiJob(const std::string& id) {
    httplib::Client c(db_.Scalar("select api_url from pgfleet.hosts where id = '" + host_ + "'"));
    c.set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
    auto res = c.Get(("/v1/jobs/" + id).c_str());
    if (!res || res->status != 200) return nullptr;
    return nlohmann::json::parse(res->body, nullptr, false);
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  std::string host_;
  Process* host_proc_ = nullptr;
};

TEST_P(HostdRestartTest, JobKeepsRunningWithTheSamePidThroughTenKill9s) {
  std::string id =
      db_.Scalar("select pgfleet.submit(array['sleep', '600'], stop_grace_seconds => 2)");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "running"; }, 30s)) << cluster_->Logs();
  pid_t pid = std::stoi(Job(id, "pid"));
  int64_t start = hostd::attempt::ProcStartTime(pid);
  ASSERT_TRUE(SameProcess(pid, start));
  ASSERT_NE(std::string::npos, Cmdline(pid).find("sleep 600")) << Cmdline(pid);

  for (int round = 1; round <= 10; ++round) {
    long long gen = Generation();
    host_proc_->Kill9();
    ASSERT_TRUE(SameProcess(pid, start)) << "round " << round << ": the job died with hostd";
    StartHost();
    // Registered again, and re-attached: the API knows the job, running, same pid.
    ASSERT_TRUE(WaitFor([&] { return Generation() > gen; }, 20s)) << "round " << round << "\n"
                                                                  << cluster_->Logs();
    nlohmann::json api;
    ASSERT_TRUE(WaitFor(
        [&] {
          api = ApiJob(id);
          return api.is_object() && api.value("state", "") == "running";
        },
        10s))
        << "round " << round << ": " << api.dump();
    EXPECT_EQ(pid, api.value("pid", 0)) << "round " << round;
    EXPECT_EQ(1, api.value("attempt", 0)) << "round " << round;
    EXPECT_TRUE(SameProcess(pid, start)) << "round " << round;
    EXPECT_EQ("running", Job(id, "state")) << "round " << round;
    EXPECT_EQ(std::to_string(pid), Job(id, "pid")) << "round " << round;
    EXPECT_EQ("1", Job(id, "attempt")) << "round " << round;
    if (HasFailure()) return;
  }
  // The reconcile after the last start has run (it runs right after
  // registering): it re-attached rather than reporting the attempt lost.
  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE(SameProcess(pid, start));
  EXPECT_EQ("running", Job(id, "state"));
  EXPECT_EQ(std::to_string(pid), Job(id, "pid"));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_events where kind = 'lost'"));
  EXPECT_EQ(
      1, db_.Count("select count(*) from pgfleet.job_events where kind = 'running' and job_id = " +
                   id));

  // The re-attached job is still under control: stopping it works (SIGTERM
  // through its shim, found again from the attempt directory; in a
  // container, forwarded to `sleep` by the container's init).
  auto stop = cluster_->Cli({"stop", id});
  EXPECT_EQ(0, stop.exit_code) << stop.err;
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "cancelled"; }, 20s)) << cluster_->Logs();
  EXPECT_EQ("15", Job(id, "signal"));
  EXPECT_FALSE(SameProcess(pid, start));
}

TEST_P(HostdRestartTest, JobWhoseShimIsKilledIsKilledTooAndReportedLost) {
  std::string id = db_.Scalar("select pgfleet.submit(array['sleep', '600'], max_attempts => 2)");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "running"; }, 30s)) << cluster_->Logs();
  pid_t pid = std::stoi(Job(id, "pid"));
  int64_t start = hostd::attempt::ProcStartTime(pid);
  auto state = hostd::attempt::ReadState(DataDir() + "/jobs/" + id + "-1");
  ASSERT_TRUE(state.started);
  ASSERT_EQ(pid, state.started->job.pid);
  ASSERT_TRUE(SameProcess(state.started->shim.pid, state.started->shim.start_time));
  kill(state.started->shim.pid, SIGKILL);
  // hostd sees the shim's lock go, kills the unwatched job, reports it lost;
  // the job is requeued and runs again as attempt 2.
  EXPECT_TRUE(WaitFor([&] { return !SameProcess(pid, start); }, 10s));
  ASSERT_TRUE(
      WaitFor([&] { return Job(id, "attempt") == "2" && Job(id, "state") == "running"; }, 30s))
      << Job(id, "state") << "\n"
      << cluster_->Logs();
  EXPECT_NE(
      std::string::npos,
      db_.Scalar("select detail from pgfleet.job_events where kind = 'lost' and job_id = " + id)
          .find("shim ended without recording"))
      << db_.Scalar(
             "select string_agg(kind || ': ' || coalesce(detail, ''), '; ') from "
             "pgfleet.job_events where job_id = " +
             id);
  EXPECT_NE(std::to_string(pid), Job(id, "pid"));
  if (driver() == "container") {
    // The killed shim could not delete attempt 1's cgroup; hostd did.
    EXPECT_TRUE(WaitFor([&] { return CgroupDirs(id + "-1").empty(); }, 5s))
        << Join(CgroupDirs(id + "-1"));
    EXPECT_FALSE(CgroupDirs(id + "-2").empty()) << "attempt 2 runs in its own cgroup";
  }
}

TEST_P(HostdRestartTest, CgroupsOfShimsKilledWhileHostdIsDownAndTheHostGroupAreRemoved) {
  if (driver() != "container") GTEST_SKIP() << "cgroups are the container driver's";
  std::string id = db_.Scalar("select pgfleet.submit(array['sleep', '600'])");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "running"; }, 30s)) << cluster_->Logs();
  auto state = hostd::attempt::ReadState(DataDir() + "/jobs/" + id + "-1");
  ASSERT_TRUE(state.started);
  ASSERT_FALSE(CgroupDirs(id + "-1").empty());
  // hostd first, then the shim: nobody is left to notice, and the shim had
  // no chance to delete its cgroup.
  host_proc_->Kill9();
  ASSERT_EQ(0, kill(state.started->shim.pid, SIGKILL));
  ASSERT_TRUE(WaitFor(
      [&] { return !SameProcess(state.started->shim.pid, state.started->shim.start_time); }, 5s));
  EXPECT_FALSE(CgroupDirs(id + "-1").empty()) << "the killed shim left its cgroup";

  StartHost();
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  // The new hostd found the attempt without its shim: killed what was left,
  // deleted the cgroup, reported the attempt lost (so it runs again).
  EXPECT_TRUE(WaitFor([&] { return CgroupDirs(id + "-1").empty(); }, 10s))
      << Join(CgroupDirs(id + "-1")) << cluster_->Logs();
  EXPECT_TRUE(ProcessGone(std::to_string(state.started->job.pid)));
  ASSERT_TRUE(
      WaitFor([&] { return Job(id, "attempt") == "2" && Job(id, "state") == "running"; }, 30s))
      << Job(id, "state") << cluster_->Logs();
  EXPECT_EQ(1,
            db_.Count("select count(*) from pgfleet.job_events where kind = 'lost' and job_id = " +
                      id + " and attempt = 1"));

  // Once nothing runs, a clean stop leaves no per-host group either.
  ASSERT_EQ(0, cluster_->Cli({"stop", id}).exit_code);
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "cancelled"; }, 30s)) << cluster_->Logs();
  EXPECT_TRUE(WaitFor([&] { return CgroupDirs(id + "-2").empty(); }, 10s));
  EXPECT_EQ(0, host_proc_->Stop());
  EXPECT_TRUE(CgroupDirs("").empty()) << Join(CgroupDirs(""));
}

TEST_P(HostdRestartTest, JobThatExitsWhileHostdIsDownIsReportedWithItsExitCode) {
  std::string id =
      db_.Scalar("select pgfleet.submit(array['sh', '-c', 'echo bye; sleep 2; exit 7'])");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "running"; }, 30s)) << cluster_->Logs();
  host_proc_->Kill9();
  pid_t pid = std::stoi(Job(id, "pid"));
  std::this_thread::sleep_for(4s);  // the job exits (code 7) meanwhile
  EXPECT_EQ(-1, hostd::attempt::ProcStartTime(pid)) << "the job should have exited by now";
  EXPECT_EQ("running", Job(id, "state")) << "nobody could have reported it yet";
  StartHost();
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "failed"; }, 20s))
      << Job(id, "state") << "\n"
      << cluster_->Logs();
  EXPECT_EQ("7", Job(id, "exit_code"));
  EXPECT_EQ("", Job(id, "signal"));
  EXPECT_EQ("exit code 7", Job(id, "error"));
  EXPECT_EQ("bye\n", Job(id, "output_tail"));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_events where kind = 'lost'"));
  EXPECT_EQ(
      1, db_.Count("select count(*) from pgfleet.job_events where kind = 'running' and job_id = " +
                   id));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.allocation_drift"));

  // Reported once: a further restart does not report it again.
  long long events = db_.Count("select count(*) from pgfleet.job_events");
  long long gen = Generation();
  host_proc_->Kill9();
  StartHost();
  ASSERT_TRUE(WaitFor([&] { return Generation() > gen; }, 20s)) << cluster_->Logs();
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(events, db_.Count("select count(*) from pgfleet.job_events"));
  EXPECT_EQ(std::string::npos, host_proc_->Log().find("rejected")) << host_proc_->Log();
}

TEST_P(HostdRestartTest, StartFailureComesBackAtOnceWithTheDriversMessage) {
  // Through the shim, a job that cannot start still fails at once with the
  // driver's own words, and nothing is left running or waiting on disk.
  std::string id = db_.Scalar("select pgfleet.submit(array['no-such-command-pgfleet'])");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "failed"; }, 20s)) << cluster_->Logs();
  EXPECT_EQ("exec \"no-such-command-pgfleet\": No such file or directory", Job(id, "error"));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_events where kind = 'running'"));
  auto state = hostd::attempt::ReadState(DataDir() + "/jobs/" + id + "-1");
  ASSERT_TRUE(state.outcome);
  EXPECT_EQ(model::ExitOutcome::kStartFailed, state.outcome->kind);
  EXPECT_FALSE(hostd::attempt::ShimAlive(DataDir() + "/jobs/" + id + "-1"));
}

// The processes whose parent is `parent` (from /proc/<pid>/stat), not zombies.
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 4 >= stat.size()) continue;
    char state = stat[close + 2];
    pid_t ppid = static_cast<pid_t>(std::atoi(stat.c_str() + close + 4));
    if (ppid == parent && state != 'Z') out.push_back(pid);
  }
  closedir(d);
  return out;
}

// The shim launcher keeps one shim forked ahead of the next start. Killed,
// that spare costs no start: the next job starts all the same (the launcher
// forks its shim then), once, and a new spare is made.
TEST_P(HostdRestartTest, AKilledSpareShimCostsNoStart) {
  std::string first = db_.Scalar("select pgfleet.submit(array['true'])");
  ASSERT_TRUE(WaitFor([&] { return Job(first, "state") == "succeeded"; }, 30s)) << cluster_->Logs();
  pid_t launcher = 0;
  for (pid_t p : ChildrenOf(host_proc_->pid())) {
    if (Cmdline(p).find("shim-launcher") != std::string::npos) launcher = p;
  }
  ASSERT_GT(launcher, 0) << "no shim launcher under hostd " << host_proc_->pid();
  // Its children once the first job's shim is gone: the spare alone.
  std::vector<pid_t> spares;
  ASSERT_TRUE(WaitFor(
      [&] {
        spares = ChildrenOf(launcher);
        return spares.size() == 1;
      },
      10s))
      << spares.size() << " children of the launcher";
  pid_t spare = spares[0];
  int64_t spare_start = hostd::attempt::ProcStartTime(spare);
  ASSERT_NE(std::string::npos, Cmdline(spare).find("shim-launcher")) << Cmdline(spare);
  kill(spare, SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return !SameProcess(spare, spare_start); }, 5s));

  std::string second = db_.Scalar("select pgfleet.submit(array['true'])");
  ASSERT_TRUE(WaitFor([&] { return Job(second, "state") == "succeeded"; }, 30s))
      << Job(second, "state") << " " << Job(second, "error") << "\n"
      << cluster_->Logs() << ShimLog();
  EXPECT_EQ("1", Job(second, "attempt"));
  EXPECT_EQ(1, db_.Count("select count(*) from pgfleet.job_events where kind = 'running' "
                         "and job_id = " +
                         second));
  // And a new spare waits for the next start.
  EXPECT_TRUE(WaitFor(
      [&] {
        auto now = ChildrenOf(launcher);
        return now.size() == 1 && now[0] != spare;
      },
      10s));
}

INSTANTIATE_TEST_SUITE_P(HostdRestart, HostdRestartTest, ::testing::Values("process", "container"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace pgfleet::testing
