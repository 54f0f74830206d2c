// A sysbatch formation's pass (schedulerd/formation_pass.h) on an in-memory
// fleet (FakeFleet): a job pinned to each eligible host, placed there in the
// same pass; one more for a host that joins, none once the formation is
// done; a job that never ran is cancelled once its host is removed.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formation_pass_fixture.h"

namespace pgfleet::schedulerd::testing_pass {
namespace {

store::FormationShape Sysbatch() {
  store::FormationShape shape;
  shape.name = "upgrade";
  shape.is_sysbatch = true;
  return shape;
}

std::map<std::string, int> JobsPerHost(const FakeFleet& fleet) {
  std::map<std::string, int> out;
  for (const auto& j : fleet.s.sysbatch_jobs) ++out[j.host];
  return out;
}

TEST_F(FormationPassTest, ASysbatchFormationRunsOnceOnEachHostAndOnAJoinerUntilDone) {
  fleet_.shape = Sysbatch();
  for (const char* h : {"h1", "h2", "h3"}) fleet_.AddHost(h, 10000, 10000);
  fleet_.system_hosts = {"h1", "h2", "h3"};
  auto r = Run();
  EXPECT_TRUE(r.assigned);
  std::map<std::string, int> assigned;
  for (const auto& [job, host] : fleet_.s.assigned) ++assigned[host];
  EXPECT_EQ((std::map<std::string, int>{{"h1", 1}, {"h2", 1}, {"h3", 1}}), assigned)
      << "pinned: bin-packing alone would have put all three on one host";

  // They ran (whatever their outcome): another pass makes nothing more.
  for (auto& j : fleet_.s.sysbatch_jobs) j.pending = false;
  Run();
  EXPECT_EQ((std::map<std::string, int>{{"h1", 1}, {"h2", 1}, {"h3", 1}}), JobsPerHost(fleet_));

  fleet_.AddHost("h4", 10000, 10000);
  fleet_.system_hosts.push_back("h4");
  pass_hosts_.reset();  // a new scheduler round: it sees the host that joined
  Run();
  EXPECT_EQ((std::map<std::string, int>{{"h1", 1}, {"h2", 1}, {"h3", 1}, {"h4", 1}}),
            JobsPerHost(fleet_));
  EXPECT_EQ("h4", fleet_.s.assigned.rbegin()->second);

  fleet_.shape.done = true;
  fleet_.AddHost("h5", 10000, 10000);
  fleet_.system_hosts.push_back("h5");
  pass_hosts_.reset();
  Run();
  EXPECT_EQ(4u, fleet_.s.sysbatch_jobs.size()) << "done: h5 gets none";
  EXPECT_TRUE(fleet_.s.stops.empty());
}

TEST_F(FormationPassTest, ASysbatchJobWhoseHostWasRemovedIsCancelledSayingWhy) {
  fleet_.shape = Sysbatch();
  fleet_.AddHost("h1", 10000, 10000);
  fleet_.system_hosts = {"h1"};
  // h1's job ran; h2 drained (still a host: its job waits); h3 was removed.
  fleet_.s.sysbatch_jobs = {{1, "h1", false, true}, {2, "h2", true, true}, {3, "h3", true, false}};
  Run();
  ASSERT_EQ(1u, fleet_.s.stops.size());
  EXPECT_EQ(std::vector<int64_t>{3}, fleet_.s.stops[0].first);
  EXPECT_EQ("sysbatch formation upgrade: host h3 was removed before the job ran",
            fleet_.s.stops[0].second);
  EXPECT_EQ(3u, fleet_.s.sysbatch_jobs.size()) << "no host got a second job";
}

}  // namespace
}  // namespace pgfleet::schedulerd::testing_pass
