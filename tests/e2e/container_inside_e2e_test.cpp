// The container driver end to end: what a job sees inside its container
// (hostname, PID 1 the init, the job PID 2) and what exec and fs see.

#include "container_e2e_fixture.h"

namespace pgfleet::testing::container_e2e {
namespace {

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

}  // namespace
}  // namespace pgfleet::testing::container_e2e
