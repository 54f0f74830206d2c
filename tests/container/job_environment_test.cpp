// The job environment both drivers build with JobEnvironment (driver.h).
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
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/opt/bin", "PGFLEET_JOB_ID=42",
                                           "PGFLEET_ATTEMPT=3"}));
}

}  // namespace
}  // namespace pgfleet::hostd
