// The job environment both drivers build with JobEnvironment (driver.h),
// for every network: the spec's env, PATH, the job's ids, its given ports.
// Plain function tests: no root or cgroups needed.

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "hostd/drivers/driver.h"

namespace pgfleet::hostd {
namespace {

RunRequest Request(std::map<std::string, std::string> env) {
  RunRequest req;
  req.job_id = 42;
  req.attempt = 3;
  req.spec.env = std::move(env);
  return req;
}

TEST(JobEnvironmentTest, TheSpecsEnvSortedThenDefaultPathThenJobAndAttempt) {
  auto env = JobEnvironment(Request({{"B", "2"}, {"A", "1 2"}}));
  EXPECT_EQ(env, (std::vector<std::string>{"A=1 2", "B=2", std::string("PATH=") + kDefaultJobPath,
                                           "PGFLEET_JOB_ID=42", "PGFLEET_ATTEMPT=3"}));
}

TEST(JobEnvironmentTest, ASpecsPathReplacesTheDefault) {
  auto env = JobEnvironment(Request({{"PATH", "/opt/bin"}}));
  EXPECT_EQ(env,
            (std::vector<std::string>{"PATH=/opt/bin", "PGFLEET_JOB_ID=42", "PGFLEET_ATTEMPT=3"}));
}

TEST(JobEnvironmentTest, GivenPortsComeLastWithTheHostsAdvertisedAddress) {
  RunRequest req = Request({});
  req.spec.ports = {{"http", 20001}, {"metrics_2", 20002}};
  req.host_address = "10.0.0.5";
  auto env = JobEnvironment(req);
  EXPECT_EQ(env,
            (std::vector<std::string>{std::string("PATH=") + kDefaultJobPath, "PGFLEET_JOB_ID=42",
                                      "PGFLEET_ATTEMPT=3", "PGFLEET_ADDR_HTTP=10.0.0.5:20001",
                                      "PGFLEET_ADDR_METRICS_2=10.0.0.5:20002",
                                      "PGFLEET_PORT_HTTP=20001", "PGFLEET_PORT_METRICS_2=20002"}));
}

}  // namespace
}  // namespace pgfleet::hostd
