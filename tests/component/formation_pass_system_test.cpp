// A system formation's pass (schedulerd/formation_pass.h) on an in-memory
// fleet (FakeFleet): a replica pinned to each eligible host, placed there in
// the same pass; a host that leaves loses its replica, saying why.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formation_pass_fixture.h"

namespace pgfleet::schedulerd::testing_pass {
namespace {

TEST_F(FormationPassTest, ASystemFormationPutsOneReplicaOnEachEligibleHost) {
  fleet_.shape = {false, 0, "node-exporter", "", true};
  for (const char* h : {"h1", "h2", "h3"}) fleet_.AddHost(h, 10000, 10000);
  fleet_.system_hosts = {"h1", "h2", "h3"};
  auto r = Run();
  EXPECT_TRUE(r.assigned);
  std::map<std::string, int> per_host;
  for (const auto& [job, host] : fleet_.s.assigned) ++per_host[host];
  EXPECT_EQ((std::map<std::string, int>{{"h1", 1}, {"h2", 1}, {"h3", 1}}), per_host)
      << "pinned: bin-packing alone would have put all three on one host";
  // Nothing changes: nothing more is made.
  for (auto& rep : fleet_.s.replicas) {
    rep.state = model::ReplicaState::kRunning;
    rep.host_id = rep.pinned_host;
    rep.host_state = "up";
  }
  Run();
  EXPECT_EQ(3u, fleet_.s.replicas.size());
  EXPECT_TRUE(fleet_.s.stops.empty());
}

TEST_F(FormationPassTest, ASystemReplicaOnAHostThatLeftIsStoppedSayingWhy) {
  fleet_.shape = {false, 0, "node-exporter", "", true};
  fleet_.AddHost("h1", 10000, 10000);
  fleet_.system_hosts = {"h1"};
  fleet_.s.replicas = {{1, model::ReplicaState::kRunning, false, "h1", "up", "h1"},
                       {2, model::ReplicaState::kRunning, true, "h2", "draining", "h2"}};
  Run();
  ASSERT_EQ(1u, fleet_.s.stops.size());
  EXPECT_EQ(std::vector<int64_t>{2}, fleet_.s.stops[0].first);
  EXPECT_EQ("system formation node-exporter: host h2 is draining", fleet_.s.stops[0].second);
}

}  // namespace
}  // namespace pgfleet::schedulerd::testing_pass
