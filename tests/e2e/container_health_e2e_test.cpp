// Health checks of container jobs (hostd/health/): an HTTP GET from inside
// the job's own network namespace (network none: only its loopback), and a
// command run inside the container that starts failing when the job removes
// the file it tests, which ends the attempt quoting the check.

#include "container_e2e_fixture.h"

namespace pgfleet::testing::container_e2e {
namespace {

TEST_F(ContainerE2eTest, HttpCheckReachesTheJobsOwnLoopback) {
  std::string id = Submit({"--rootfs", rootfs_, "--network", "none", "--health-http", "8080/",
                           "--health-interval", "1", "--", "sh", "-c",
                           "mkdir -p www && echo ok > www/index.html && "
                           "exec httpd -f -p 127.0.0.1:8080 -h www"});
  ASSERT_TRUE(WaitFor([&] { return Job(id, "health") == "healthy"; }, 30s))
      << JobsByState() << " health=" << Job(id, "health") << " "
      << Job(id, "coalesce(health_output, '')") << cluster_->Logs();
  EXPECT_NE(std::string::npos, Job(id, "health_output").find("200")) << Job(id, "health_output");
  // With network none its httpd listens on its own loopback only: the check
  // was made from inside the job's network namespace.
  ASSERT_EQ(0, cluster_->Cli({"stop", id}).exit_code);
  EXPECT_TRUE(WaitFinished(id));
}

TEST_F(ContainerE2eTest, CommandCheckRunsInsideAndItsFailureEndsTheAttempt) {
  std::string id = Submit({"--rootfs", rootfs_, "--network", "none", "--health-cmd",
                           "test -f ready", "--health-interval", "1", "--health-threshold", "2",
                           "--stop-grace", "1", "--", "sh", "-c",
                           "touch ready; sleep 4; rm ready; exec sleep 300"});
  ASSERT_TRUE(WaitFor([&] { return Job(id, "health") == "healthy"; }, 30s))
      << JobsByState() << cluster_->Logs();
  ASSERT_TRUE(WaitFinished(id, 60s)) << JobsByState() << cluster_->Logs();
  EXPECT_EQ("failed", Job(id, "state"));
  EXPECT_EQ("health check failed 2 times: exit code 1", Job(id, "error"));
  EXPECT_EQ("unhealthy", Job(id, "health"));
  EXPECT_EQ("1", db_.Scalar("select count(*) from pgfleet.job_events where job_id = " + id +
                            " and kind = 'health' and detail = 'unhealthy: exit code 1'"));
}

}  // namespace
}  // namespace pgfleet::testing::container_e2e
