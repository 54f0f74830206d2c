// Ports and networks in the placement core (issue 37): named ports are a
// host resource, given from the host's range or as asked, never twice; a
// bridge job goes only to hosts that offer the bridge; the unplaced say
// which port they wait for.

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/placement/placement.h"
#include "placement_inputs.h"

namespace pgfleet::placement::testing_placement {
namespace {

HostView Ranged(std::string id, int lo, int hi, std::set<int> held = {}) {
  HostView h = Host(std::move(id), 100000, 100000);
  h.port_lo = lo;
  h.port_hi = hi;
  h.ports_held = std::move(held);
  h.bridge = true;
  return h;
}

JobRequest WithPorts(int64_t id, std::map<std::string, int> ports) {
  JobRequest j = Job(id, 100, 64);
  j.ports = std::move(ports);
  return j;
}

TEST(PickPorts, GivesTheLowestFreePortsOfTheRangeAndNamedOnesAsAsked) {
  const HostView host = Ranged("h1", 20000, 20009, {20000, 20002});
  auto ports = PickPorts(WithPorts(1, {{"a", 0}, {"b", 0}, {"c", 20001}}), host);
  ASSERT_TRUE(ports);
  // c takes 20001 as asked, so a and b get the next free ones after it.
  EXPECT_EQ((std::map<std::string, int>{{"a", 20003}, {"b", 20004}, {"c", 20001}}), *ports);
  EXPECT_TRUE(PickPorts(Job(2, 1, 1), host)->empty());
}

TEST(PickPorts, RefusesAHeldPortAFullRangeAndAnUnprivilegedPortOutsideTheRange) {
  const HostView host = Ranged("h1", 20000, 20001, {20000});
  EXPECT_FALSE(PickPorts(WithPorts(1, {{"a", 20000}}), host));
  EXPECT_FALSE(PickPorts(WithPorts(1, {{"a", 0}, {"b", 0}}), host));
  EXPECT_TRUE(PickPorts(WithPorts(1, {{"a", 0}}), host));
  JobRequest outside = WithPorts(1, {{"web", 8080}});
  EXPECT_FALSE(PickPorts(outside, host));
  outside.privileged = true;  // a privileged job may name any port
  ASSERT_TRUE(PickPorts(outside, host));
  EXPECT_EQ(8080, PickPorts(outside, host)->at("web"));
  EXPECT_FALSE(PickPorts(WithPorts(1, {{"a", 70000}}), Ranged("h1", 1, 65535)));
}

TEST(PickPorts, AHostWithoutARangeGivesNoPortZero) {
  HostView none = Host("h1", 1000, 1000);  // port_hi < port_lo: no range
  EXPECT_FALSE(PickPorts(WithPorts(1, {{"a", 0}}), none));
}

TEST(Placement, NoPortIsGivenTwiceInOnePlan) {
  std::vector<JobRequest> jobs;
  for (int i = 1; i <= 50; ++i) jobs.push_back(WithPorts(i, {{"http", 0}}));
  Plan plan = PlanPlacements(jobs, {Ranged("h1", 20000, 20039)});
  ASSERT_EQ(40u, plan.placements.size());
  std::set<int> given;
  for (const auto& p : plan.placements) {
    ASSERT_EQ(1u, p.ports.size());
    const int port = p.ports.at("http");
    EXPECT_TRUE(port >= 20000 && port <= 20039) << port;
    EXPECT_TRUE(given.insert(port).second) << "port " << port << " given twice";
  }
  ASSERT_EQ(10u, plan.unplaced.size());
  for (const auto& u : plan.unplaced) {
    EXPECT_FALSE(u.never_fits);
    EXPECT_NE(std::string::npos, u.reason.find("waiting for ports: ports.http")) << u.reason;
  }
}

TEST(Placement, PortsHeldOnAHostSendTheJobToAnother) {
  HostView full = Ranged("a-full", 20000, 20000, {20000});
  HostView free = Ranged("b-free", 20000, 20000);
  // a-full is the fuller host, which bin-packing would pick.
  full.cpu_allocated = 90000;
  auto where = Where(PlanPlacements({WithPorts(1, {{"http", 0}})}, {full, free}));
  EXPECT_EQ("b-free", where[1]);
}

TEST(Placement, AJobWithoutPortsIsNotHeldBackByOneThatFoundNoPort) {
  // Job 1 (small, with a port) finds no port; job 2 (larger, no port) must
  // still be placed: the no-room shortcut is for cpu and memory alone.
  HostView h = Ranged("h1", 20000, 20000, {20000});
  Plan plan = PlanPlacements({WithPorts(1, {{"http", 0}}), Job(2, 500, 500, 40)}, {h});
  ASSERT_EQ(1u, plan.placements.size());
  EXPECT_EQ(2, plan.placements[0].job_id);
}

TEST(Placement, ABridgeJobGoesOnlyToAHostThatOffersTheBridge) {
  HostView without = Host("a-none", 1000, 1000);
  HostView with = Ranged("b-bridge", 20000, 20010);
  JobRequest bridge = Job(1, 100, 64);
  bridge.bridge = true;
  EXPECT_FALSE(LabelsMatch(bridge, without));
  EXPECT_TRUE(LabelsMatch(bridge, with));
  EXPECT_EQ("b-bridge", Where(PlanPlacements({bridge}, {without, with}))[1]);

  Plan plan = PlanPlacements({bridge}, {without});
  ASSERT_EQ(1u, plan.unplaced.size());
  EXPECT_TRUE(plan.unplaced[0].never_fits);
  EXPECT_NE(std::string::npos, plan.unplaced[0].reason.find("no host offers network bridge"))
      << plan.unplaced[0].reason;
}

TEST(Placement, ReasonsNameThePort) {
  // A named port held everywhere: waiting, naming port and name.
  Plan held = PlanPlacements({WithPorts(1, {{"web", 20005}})}, {Ranged("h1", 20000, 20010, {20005})});
  ASSERT_EQ(1u, held.unplaced.size());
  EXPECT_FALSE(held.unplaced[0].never_fits);
  EXPECT_NE(std::string::npos,
            held.unplaced[0].reason.find("port 20005 (ports.web) is held on h1"))
      << held.unplaced[0].reason;

  // An unprivileged job naming a port outside every range never fits.
  Plan outside = PlanPlacements({WithPorts(1, {{"db", 5432}})}, {Ranged("h1", 20000, 20010)});
  ASSERT_EQ(1u, outside.unplaced.size());
  EXPECT_TRUE(outside.unplaced[0].never_fits);
  EXPECT_NE(std::string::npos, outside.unplaced[0].reason.find("ports.db asks for host port 5432"))
      << outside.unplaced[0].reason;

  // More ports than any range holds never fit either.
  Plan many = PlanPlacements({WithPorts(1, {{"a", 0}, {"b", 0}, {"c", 0}})},
                             {Ranged("h1", 20000, 20001)});
  ASSERT_EQ(1u, many.unplaced.size());
  EXPECT_TRUE(many.unplaced[0].never_fits);
  EXPECT_NE(std::string::npos, many.unplaced[0].reason.find("3 ports asked")) << many.unplaced[0].reason;
  EXPECT_NE(std::string::npos, many.unplaced[0].reason.find("holds 2")) << many.unplaced[0].reason;
}

}  // namespace
}  // namespace pgfleet::placement::testing_placement
