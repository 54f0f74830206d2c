#pragma once
// What the container security tests (container_filesystem_test.cpp,
// container_privileges_test.cpp, container_process_test.cpp) share: their
// suite, ContainerSecurityTest, on the container driver fixture
// (container_fixture.h), and the driver's refusal of a job's user.

#include <string>

#include "container_fixture.h"

namespace pgfleet::hostd::testing_container {

// A suite of its own (gtest wants one fixture class per suite name).
class ContainerSecurityTest : public ContainerDriverTest {
 protected:
  // The driver's refusal of an unprivileged `id` job running as `user`
  // (a failure, and "", when it ran).
  std::string RefusalOf(const std::string& user) {
    RunRequest req = Request({"id"});
    req.spec.user = user;
    try {
      Result r = Run(req);
      ADD_FAILURE() << user << " ran: " << r.output;
    } catch (const DriverError& e) {
      return e.what();
    }
    return "";
  }
};

}  // namespace pgfleet::hostd::testing_container
