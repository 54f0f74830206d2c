// Job files through the container driver with real daemons (docs/files.md):
// `pgfleet run --file` ships a script into a container job's /work, where it
// runs as the job's user, in a rootfs and on the host's tree alike.

#include <sys/stat.h>

#include <fstream>

#include "container_e2e_fixture.h"

namespace pgfleet::testing::container_e2e {
namespace {

TEST_F(ContainerE2eTest, AJobWithAFileRunShRunsItInItsContainer) {
  TempDir local;
  const std::string script = local.path() + "/run.sh";
  std::ofstream(script) << "#!/bin/sh\necho \"run.sh ran as $(id -u) in $PWD\"\n";
  chmod(script.c_str(), 0755);
  std::string in_rootfs = Submit({"--rootfs", rootfs_, "--file", script, "--", "./run.sh"});
  std::string on_host = Submit({"--file", script + ":bin/run.sh", "--", "sh", "bin/run.sh"});
  ASSERT_TRUE(WaitFinished(in_rootfs)) << JobsByState();
  ASSERT_TRUE(WaitFinished(on_host)) << JobsByState();
  EXPECT_EQ("succeeded", Job(in_rootfs, "state")) << Job(in_rootfs, "error");
  EXPECT_EQ("run.sh ran as 65534 in /work\n", Job(in_rootfs, "output_tail"));
  EXPECT_EQ("succeeded", Job(on_host, "state")) << Job(on_host, "error");
  EXPECT_EQ(0u, Job(on_host, "output_tail").rfind("run.sh ran as 65534 in /", 0))
      << Job(on_host, "output_tail");
}

}  // namespace
}  // namespace pgfleet::testing::container_e2e
