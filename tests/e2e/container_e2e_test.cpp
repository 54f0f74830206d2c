// End to end with the container driver: PostgreSQL (scripts/test),
// pgfleet-schedulerd, pgfleet-hostd --driver container and the pgfleet CLI. Jobs
// run in a busybox rootfs built by scripts/make-rootfs into a temporary
// directory and named with `--rootfs DIR`. Every outcome is read back from
// pgfleet.jobs, the way an operator would see it.
//
// Needs root and the memory, cpu, cpuacct and pids cgroup controllers (CI has
// both); without them every test FAILS with the reason, it never skips. Each
// test has its own database, cluster and host ids, so the job cgroups
// (pgfleet/<host>/<job>-<attempt>) of two tests never meet, also under ctest -j.

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/util/text.h"
#include "hostd/drivers/container/cgroup.h"
#include "hostd/drivers/container/container.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool IsDir(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

class ContainerE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rootfs_parent_ = std::make_unique<TempDir>();
    rootfs_ = rootfs_parent_->path() + "/busybox";
    CommandResult r =
        pgfleet::testing::Run({SourcePath("scripts/make-rootfs"), "busybox", rootfs_}, {}, 120s);
    rootfs_error_ = r.exit_code == 0 ? "" : "scripts/make-rootfs failed: " + r.out + r.err;
  }
  static void TearDownTestSuite() { rootfs_parent_.reset(); }

  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "the container e2e tests must run as root (CI does); run them "
                                "with sudo";
    std::string why;
    ASSERT_TRUE(hostd::ContainerDriverAvailable(&why))
        << "container driver unavailable on this machine: " << why;
    ASSERT_TRUE(rootfs_error_.empty()) << rootfs_error_;
    cluster_ = std::make_unique<Cluster>(db_);
    cluster_->StartScheduler("s1");
    host_ = NewHostId("c");
    container_hosts_.push_back(host_);
    cluster_->StartHost(host_, 4000, 4000, {"--driver", "container", "--usage-interval", "1s"});
    ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
    ASSERT_EQ("container",
              db_.Scalar("select driver from pgfleet.hosts where id = '" + host_ + "'"))
        << cluster_->Logs();
  }

  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs();
    // Stopping hostd leaves running jobs running (by design): clean up first.
    for (const auto& h : container_hosts_) KillJobsOf(h);
    cluster_.reset();
    // Job cgroups are checked by the tests; the per-host parent outlives
    // hostd (its shims share it), so remove it once it is empty.
    for (const auto& h : container_hosts_) {
      for (const auto& dir : HostCgroupDirs(h)) rmdir(dir.c_str());
    }
  }

  // A host id no other test (or repetition, or process) uses.
  static std::string NewHostId(const std::string& kind) {
    static int n = 0;
    return "e2e-" + kind + "-" + std::to_string(getpid()) + "-" + std::to_string(++n);
  }

  // pgfleet/<scope>/<host> in every controller the driver uses; on this
  // cgroup v1 CI machine: /sys/fs/cgroup/{memory,cpu,cpuacct,pids}/pgfleet/<scope>/<host>.
  static std::vector<std::string> HostCgroupDirs(const std::string& host) {
    return pgfleet::testing::HostCgroupDirs(host);
  }

  // Every test waits for its jobs to finish, so a job cgroup still there is a
  // leak (or a test that failed half-way): report it, kill what runs in it and
  // remove it, so the next test or run starts clean.
  static void KillJobsOf(const std::string& host) {
    for (const auto& dir : HostCgroupDirs(host)) {
      for (const auto& job : Subdirs(dir)) {
        ADD_FAILURE() << "job cgroup " << dir << "/" << job << " is left";
        std::string procs;
        try {
          procs = util::ReadFile(dir + "/" + job + "/cgroup.procs");
        } catch (const std::exception&) {
          continue;  // deleted meanwhile
        }
        for (const auto& pid : Lines(procs)) kill(std::stoi(pid), SIGKILL);
      }
    }
    for (const auto& dir : HostCgroupDirs(host)) {
      for (const auto& job : Subdirs(dir)) {
        WaitFor([&] { return rmdir((dir + "/" + job).c_str()) == 0; }, 5s);
      }
    }
  }

  // Submits with the CLI; returns the job id.
  std::string Submit(std::vector<std::string> args) {
    args.insert(args.begin(), "run");
    CommandResult r = cluster_->Cli(args, 30s);
    EXPECT_EQ(0, r.exit_code) << r.out << r.err;
    return util::Trim(r.out);
  }

  std::string Job(const std::string& id, const std::string& column) {
    return db_.Scalar("select " + column + " from pgfleet.jobs where id = " + id);
  }

  bool WaitState(const std::string& id, const std::string& state,
                 std::chrono::milliseconds timeout = 30s) {
    return WaitFor([&] { return Job(id, "state") == state; }, timeout);
  }

  bool WaitFinished(const std::string& id, std::chrono::milliseconds timeout = 30s) {
    return WaitFor(
        [&] {
          std::string s = Job(id, "state");
          return s == "succeeded" || s == "failed" || s == "cancelled";
        },
        timeout);
  }

  std::string JobsByState() {
    return db_.Scalar(
        "select string_agg(id || ':' || state || ':' || coalesce(error, ''), ', ' order by id)"
        "  from pgfleet.jobs");
  }

  static inline std::unique_ptr<TempDir> rootfs_parent_;
  static inline std::string rootfs_;
  static inline std::string rootfs_error_;

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  std::string host_;                          // the container host every test has
  std::vector<std::string> container_hosts_;  // container hosts whose cgroups are checked
};

TEST_F(ContainerE2eTest, JobOverItsMemoryLimitFailsAsOomKilled) {
  // busybox dd allocates its 200 MiB block; the 64 MiB memory cgroup OOM-kills it.
  std::string id = Submit({"--memory", "64", "--rootfs", rootfs_, "--", "dd", "if=/dev/zero",
                           "of=/dev/null", "bs=200M", "count=1"});
  ASSERT_TRUE(WaitFinished(id)) << JobsByState();
  EXPECT_EQ("failed", Job(id, "state"));
  EXPECT_EQ("t", Job(id, "oom_killed"));
  // The driver's error wins over report_jobs' generic "out of memory" (describe_exit).
  EXPECT_EQ("out of memory (limit 64 MiB)", Job(id, "error"));
  EXPECT_EQ(std::to_string(SIGKILL), Job(id, "signal"));
  EXPECT_EQ("", Job(id, "exit_code"));  // null: it never exited by itself
  EXPECT_EQ("t", Job(id, "peak_memory_bytes > 0"));
  EXPECT_EQ("t", Job(id, "peak_memory_bytes <= 64 * 1024 * 1024")) << Job(id, "peak_memory_bytes");
  EXPECT_EQ(1, db_.Count("select count(*) from pgfleet.job_events where job_id = " + id +
                         " and kind = 'failed' and detail = 'out of memory (limit 64 MiB)'"));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.allocation_drift"));
}

// A child of the job is OOM-killed, the job handles it and exits 0: the job
// succeeded (its exit code decides), and the OOM kill is recorded as such.
TEST_F(ContainerE2eTest, AJobThatSurvivesAnOomKilledChildSucceedsWithTheKillRecorded) {
  std::string id = Submit({"--memory", "64", "--rootfs", rootfs_, "--", "sh", "-c",
                           "dd if=/dev/zero of=/dev/null bs=200M count=1; echo survived; exit 0"});
  ASSERT_TRUE(WaitFinished(id)) << JobsByState();
  EXPECT_EQ("succeeded", Job(id, "state")) << Job(id, "error");
  EXPECT_EQ("t", Job(id, "oom_killed"));
  EXPECT_EQ("0", Job(id, "exit_code"));
  EXPECT_EQ("", Job(id, "error"));
  EXPECT_NE(std::string::npos, Job(id, "output_tail").find("survived"));
  EXPECT_EQ(1, db_.Count("select count(*) from pgfleet.job_events where job_id = " + id +
                         " and kind = 'succeeded' and detail like 'exit code 0 (a process of the job"
                         " was killed out of memory%'"));
}

TEST_F(ContainerE2eTest, HostnameIsTheJobIdAndPsShowsTheInitAndTheJob) {
  std::string hostname = Submit({"--rootfs", rootfs_, "--", "hostname"});
  std::string ps = Submit({"--rootfs", rootfs_, "--", "ps"});
  ASSERT_TRUE(WaitState(hostname, "succeeded")) << JobsByState();
  ASSERT_TRUE(WaitState(ps, "succeeded")) << JobsByState();
  EXPECT_EQ(hostname + "\n", Job(hostname, "output_tail"));

  // busybox ps: "PID USER COMMAND", then the container's init as PID 1,
  // titled, with nothing of hostd's command line (paths, host id), and the
  // job as PID 2, its only child.
  std::string out = Job(ps, "output_tail");
  auto lines = Lines(out);
  ASSERT_EQ(3u, lines.size()) << "expected a header, the init and the job:\n" << out;
  auto init = Words(lines[1]);
  ASSERT_GE(init.size(), 2u) << out;
  EXPECT_EQ("1", init.front()) << out;
  EXPECT_EQ("pgfleet-init", init.back()) << out;
  EXPECT_EQ(std::string::npos, out.find("shim")) << out;
  EXPECT_EQ(std::string::npos, out.find(host_)) << out;
  auto job = Words(lines[2]);
  ASSERT_GE(job.size(), 2u) << out;
  EXPECT_EQ("2", job.front()) << out;
  EXPECT_EQ("ps", job.back()) << out;
}

TEST_F(ContainerE2eTest, EveryFinishedJobRecordsPeakMemoryAndCpuTime) {
  // One INSERT with every kind of ending: success, exit code, CPU work, OOM
  // kill, and the host's read-only filesystem (no rootfs) for two of them.
  auto conn = db_.Connect();
  pqxx::work tx(*conn);
  tx.exec_params0(
      "insert into pgfleet.jobs (command, rootfs, memory) values"
      " (array['true'], $1, 64),"
      " (array['sh', '-c', 'echo some output; exit 3'], $1, 64),"
      " (array['sh', '-c', 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done'], $1, 64),"
      " (array['dd', 'if=/dev/zero', 'of=/dev/null', 'bs=200M', 'count=1'], $1, 64),"
      " (array['/bin/true'], null, 64),"
      " (array['/bin/sh', '-c', 'exit 1'], null, 64)",
      rootfs_);
  tx.commit();
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_.Count(
                   "select count(*) from pgfleet.jobs where state in ('succeeded', 'failed')") == 6;
      },
      60s))
      << JobsByState();
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs"
                         " where not coalesce(peak_memory_bytes > 0 and cpu_seconds >= 0, false)"))
      << db_.Scalar(
             "select string_agg(id || ': peak=' || coalesce(peak_memory_bytes::text, 'null') ||"
             " ' cpu=' || coalesce(cpu_seconds::text, 'null'), ', ') from pgfleet.jobs");
  // The outcomes are the expected ones, so each kind of ending was covered.
  EXPECT_EQ("succeeded,failed,succeeded,failed,succeeded,failed",
            db_.Scalar("select string_agg(state, ',' order by id) from pgfleet.jobs"));
  EXPECT_EQ("0,3,0,-,0,1", db_.Scalar("select string_agg(coalesce(exit_code::text, '-'), ','"
                                      " order by id) from pgfleet.jobs"));
  EXPECT_EQ(1, db_.Count("select count(*) from pgfleet.jobs where oom_killed"));
  EXPECT_EQ("t", db_.Scalar("select cpu_seconds > 0 from pgfleet.jobs where command[1] = 'sh'"
                            " and command[3] like 'i=0%'"));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.allocation_drift"));
}

TEST_F(ContainerE2eTest, StopCancelsARunningJobWithinItsGraceAndRemovesItsCgroup) {
  const int grace = 2;
  std::string id =
      Submit({"--stop-grace", std::to_string(grace), "--rootfs", rootfs_, "--", "sleep", "60"});
  ASSERT_TRUE(WaitState(id, "running")) << JobsByState();
  std::vector<std::string> job_dirs;
  for (const auto& dir : HostCgroupDirs(host_)) job_dirs.push_back(dir + "/" + id + "-1");
  ASSERT_FALSE(job_dirs.empty());
  for (const auto& dir : job_dirs) EXPECT_TRUE(IsDir(dir)) << dir << " missing while it runs";

  auto t0 = Clock::now();
  CommandResult s = cluster_->Cli({"stop", id}, 30s);
  ASSERT_EQ(0, s.exit_code) << s.out << s.err;
  // grace + 8 s: the stop reaches hostd within a scheduler tick (0.5 s) or a
  // reconcile (1 s); the rest is margin for the report on a busy machine.
  ASSERT_TRUE(WaitState(id, "cancelled", std::chrono::seconds(grace + 8))) << JobsByState();
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  // The container's init forwards SIGTERM to sleep, which is not PID 1 and
  // so dies of it at once: no waiting out the grace.
  EXPECT_EQ(std::to_string(SIGTERM), Job(id, "signal"));
  EXPECT_LT(seconds, grace) << "the stop waited out the grace";
  EXPECT_EQ("t", Job(id, "peak_memory_bytes > 0 and cpu_seconds >= 0"));
  // The driver deletes the cgroup before it reports the exit.
  for (const auto& dir : job_dirs) EXPECT_FALSE(IsDir(dir)) << dir << " is left";
  for (const auto& dir : HostCgroupDirs(host_)) {
    EXPECT_TRUE(Subdirs(dir).empty()) << dir << " still has job cgroups";
  }
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.allocation_drift"));
}

TEST_F(ContainerE2eTest, AJobThatTrapsSigtermEndsWithItsOwnCodeAndOneThatIgnoresItIsKilled) {
  const int grace = 2;
  // sh as the job's main process: its trap runs on the forwarded SIGTERM.
  std::string trapping =
      Submit({"--stop-grace", std::to_string(grace), "--rootfs", rootfs_, "--", "sh", "-c",
              "trap 'echo got TERM; exit 7' TERM; while true; do sleep 0.1; done"});
  std::string deaf = Submit({"--stop-grace", std::to_string(grace), "--rootfs", rootfs_, "--",
                             "sh", "-c", "trap '' TERM; while true; do sleep 0.1; done"});
  ASSERT_TRUE(WaitState(trapping, "running")) << JobsByState();
  ASSERT_TRUE(WaitState(deaf, "running")) << JobsByState();
  auto t0 = Clock::now();
  CommandResult s = cluster_->Cli({"stop", trapping, deaf}, 30s);
  ASSERT_EQ(0, s.exit_code) << s.out << s.err;
  ASSERT_TRUE(WaitState(trapping, "cancelled", std::chrono::seconds(grace + 8))) << JobsByState();
  EXPECT_EQ("7", Job(trapping, "exit_code"));
  EXPECT_EQ("", Job(trapping, "signal"));
  EXPECT_NE(std::string::npos, Job(trapping, "output_tail").find("got TERM"));
  // The one that ignores SIGTERM is killed when its grace runs out.
  ASSERT_TRUE(WaitState(deaf, "cancelled", std::chrono::seconds(grace + 8))) << JobsByState();
  EXPECT_EQ(std::to_string(SIGKILL), Job(deaf, "signal"));
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - t0).count(), grace - 0.1);
}

// Live usage (host disk and insight issue, item 4): read from the job's cgroup.
TEST_F(ContainerE2eTest, ABusyJobShowsItsCpuAndMemoryInUseFromItsCgroup) {
  std::string id = Submit({"--cpu", "1000", "--rootfs", rootfs_, "--", "sha256sum", "/dev/zero"});
  ASSERT_TRUE(WaitState(id, "running")) << JobsByState();
  const std::string used =
      "select coalesce(cpu_used, -1) from pgfleet.visible_jobs where id = " + id;
  // Heartbeats every 0.5 s carry usage every 1 s: a few seconds at most.
  ASSERT_TRUE(WaitFor([&] { return std::stod(db_.Scalar(used)) > 0.5; }, 15s))
      << "cpu_used " << db_.Scalar(used);
  EXPECT_EQ("t",
            db_.Scalar("select memory_used_bytes > 0 from pgfleet.visible_jobs where id = " + id));
  EXPECT_EQ(
      "t", db_.Scalar("select cpu_used > 0.5 from pgfleet.host_status where id = '" + host_ + "'"));
  CommandResult s = cluster_->Cli({"stop", id}, 30s);
  ASSERT_EQ(0, s.exit_code) << s.out << s.err;
  ASSERT_TRUE(WaitFinished(id)) << JobsByState();
  EXPECT_EQ("-1", db_.Scalar(used)) << "a finished job shows no usage";
}

// Looking inside (host disk and insight issue, item 5): exec enters the
// container's namespaces, root and cgroup; fs reads the container's root.
TEST_F(ContainerE2eTest, ExecAndFsSeeWhatTheContainerSees) {
  std::string id = Submit({"--rootfs", rootfs_, "--", "sleep", "60"});
  ASSERT_TRUE(WaitState(id, "running")) << JobsByState();
  auto hostname = cluster_->Cli({"exec", id, "--", "hostname"}, 30s);
  EXPECT_EQ(0, hostname.exit_code) << hostname.err;
  EXPECT_EQ(id + "\n", hostname.out);  // its UTS namespace: the hostname is the job id
  // Its own /etc/hostname and /etc/hosts, as a container has.
  auto etc = cluster_->Cli({"exec", id, "--", "cat", "/etc/hostname", "/etc/hosts"}, 30s);
  EXPECT_EQ(0, etc.exit_code) << etc.err;
  EXPECT_EQ(0u, etc.out.find(id + "\n127.0.0.1\tlocalhost\n")) << etc.out;
  EXPECT_NE(std::string::npos, etc.out.find("127.0.1.1\t" + id + "\n")) << etc.out;
  auto cg = cluster_->Cli({"exec", id, "--", "cat", "/proc/self/cgroup"}, 30s);
  EXPECT_EQ(0, cg.exit_code) << cg.err;
  EXPECT_NE(std::string::npos,
            cg.out.find("/" + hostd::HostCgroupPathFor(cluster_->dir() + "/" + host_, host_) + "/" +
                        id + "-1"))
      << cg.out;
  // Its PID namespace: the container's init is PID 1 there, the job's sleep PID 2.
  auto init = cluster_->Cli({"exec", id, "--", "cat", "/proc/1/cmdline"}, 30s);
  EXPECT_EQ(0, init.exit_code) << init.err;
  EXPECT_EQ(0u, init.out.find(std::string("pgfleet-init\0", 13))) << init.out;
  auto ps = cluster_->Cli({"exec", id, "--", "cat", "/proc/2/cmdline"}, 30s);
  EXPECT_EQ(0, ps.exit_code) << ps.err;
  EXPECT_EQ(0u, ps.out.find("sleep")) << ps.out;
  // Nothing of hostd's environment reaches the job through its init.
  auto environ = cluster_->Cli({"exec", id, "--", "cat", "/proc/1/environ"}, 30s);
  EXPECT_EQ(std::string::npos, environ.out.find("PG")) << environ.out;
  EXPECT_EQ(std::string::npos, environ.out.find("PATH=")) << environ.out;
  auto code = cluster_->Cli({"exec", id, "--", "sh", "-c", "exit 7"}, 30s);
  EXPECT_EQ(7, code.exit_code) << code.err;
  // -t: a terminal of its own inside the container too (its output has the
  // terminal's line endings).
  auto tty = cluster_->Cli({"exec", "-t", id, "--", "sh", "-c", "test -t 1 && echo on-a-tty"}, 30s);
  EXPECT_EQ(0, tty.exit_code) << tty.err;
  EXPECT_EQ("on-a-tty\r\n", tty.out);

  auto root = cluster_->Cli({"fs", id, "/"}, 30s);
  ASSERT_EQ(0, root.exit_code) << root.err;
  for (const char* name : {"bin", "proc", "work"}) {
    EXPECT_NE(std::string::npos, root.out.find(name)) << root.out;
  }
  auto up = cluster_->Cli({"fs", id, "/bin/../../etc"}, 30s);
  EXPECT_EQ(1, up.exit_code);
  EXPECT_NE(std::string::npos, up.err.find("path must not contain")) << up.err;
  CommandResult s = cluster_->Cli({"stop", id}, 30s);
  ASSERT_EQ(0, s.exit_code) << s.out << s.err;
  ASSERT_TRUE(WaitFinished(id)) << JobsByState();
}

TEST_F(ContainerE2eTest, HostsShowTheDriverEachHostdChose) {
  // A root hostd started without --driver (auto, the default) picks container.
  // The fallback to process when hostd is not root cannot be tested here: these
  // tests run as root, and dropping root would lose the cgroups the rest need.
  std::string auto_host = NewHostId("auto");
  std::string process_host = NewHostId("p");
  container_hosts_.push_back(auto_host);
  cluster_->processes().push_back(std::make_unique<Process>(
      std::vector<std::string>{BinaryPath("pgfleet-hostd"), "--db", db_.dsn(), "--id", auto_host,
                               "--token-file", cluster_->token_file(), "--cpu", "1000", "--memory",
                               "1000", "--data-dir", cluster_->dir() + "/" + auto_host,
                               "--heartbeat-interval", "0.5"},
      cluster_->dir() + "/" + auto_host + ".log"));
  cluster_->StartHost(process_host, 1000, 1000, {"--driver", "process"});
  ASSERT_TRUE(cluster_->WaitHostsUp(3)) << cluster_->Logs();

  CommandResult r = cluster_->Cli({"hosts", "--json"}, 30s);
  ASSERT_EQ(0, r.exit_code) << r.err;
  auto hosts = nlohmann::json::parse(r.out);
  ASSERT_TRUE(hosts.is_array()) << r.out;
  std::map<std::string, nlohmann::json> by_id;
  for (const auto& h : hosts) by_id[h["id"].get<std::string>()] = h;
  ASSERT_EQ(3u, by_id.size()) << r.out;
  EXPECT_EQ("container", by_id[host_]["driver"]) << r.out;
  EXPECT_EQ("container", by_id[auto_host]["driver"]) << r.out;
  EXPECT_EQ("root with cgroups: jobs run as containers", by_id[auto_host]["driver_note"]) << r.out;
  EXPECT_EQ("process", by_id[process_host]["driver"]) << r.out;
  EXPECT_EQ("chosen with --driver process", by_id[process_host]["driver_note"]) << r.out;
}

TEST_F(ContainerE2eTest, RunWaitExitsWithTheContainerJobsExitCode) {
  CommandResult r = cluster_->Cli(
      {"run", "--wait", "--rootfs", rootfs_, "--", "sh", "-c", "echo in-box; exit 4"}, 60s);
  EXPECT_EQ(4, r.exit_code) << r.out << r.err;
  EXPECT_NE(std::string::npos, r.out.find("in-box")) << r.out;
  std::string id = db_.Scalar("select max(id) from pgfleet.jobs");
  EXPECT_EQ("failed", Job(id, "state"));
  EXPECT_EQ("4", Job(id, "exit_code"));
  EXPECT_EQ(rootfs_, Job(id, "rootfs"));
}

}  // namespace
}  // namespace pgfleet::testing
