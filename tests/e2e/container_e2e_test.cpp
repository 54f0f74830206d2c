// The container driver end to end: limits and what a finished job records
// (memory, cpu), live usage, the driver each host chose, run --wait.

#include "container_e2e_fixture.h"

namespace pgfleet::testing::container_e2e {
namespace {

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
}  // namespace pgfleet::testing::container_e2e
