// Spread end to end (formations.spread): a scheduler places a service's
// replicas over zones and over hosts on hollow hosts (three hostd processes
// of two hosts each, one zone each), and keeps them spread when a zone's
// hosts are lost. Bad spread values are refused by the column's rule.

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class SpreadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_.Scalar("update pgfleet.settings set value = '3' where name = 'host_ttl_seconds'");
    cluster_.StartScheduler("s1", {"--host-ttl", "3"});
  }
  void TearDown() override {
    if (HasFailure()) std::cout << cluster_.Logs();
  }

  // Two hollow hosts <zone>-1, <zone>-2 labelled zone=<zone>, in one process.
  Process& StartZone(const std::string& zone) {
    return cluster_.StartHollowHosts(zone + "-", 2,
                                     {"--cpu", "4000", "--memory", "4096", "--label", "zone=" + zone});
  }

  // Running replicas of `formation` per zone (per host when by_host).
  std::map<std::string, int> Running(const std::string& formation, bool by_host = false) {
    std::string key = by_host ? "j.host_id" : "h.labels ->> 'zone'";
    auto rows = db_.Scalar(
        "select coalesce(string_agg(k || '=' || n, ',' order by k), '') from ("
        " select " + key + " as k, count(*) as n from pgfleet.jobs j"
        "   join pgfleet.hosts h on h.id = j.host_id"
        "  where j.formation = '" + formation + "' and j.state = 'running'"
        "    and j.desired_state = 'run' group by 1) x");
    std::map<std::string, int> out;
    size_t pos = 0;
    while (pos < rows.size()) {
      size_t comma = rows.find(',', pos);
      std::string item = rows.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      size_t eq = item.find('=');
      out[item.substr(0, eq)] = std::stoi(item.substr(eq + 1));
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    return out;
  }

  TestDatabase db_;
  Cluster cluster_{db_};
};

TEST_F(SpreadTest, SixReplicasOverThreeZonesLandTwoEachAndStaySpreadWhenAZoneIsLost) {
  StartZone("a");
  StartZone("b");
  Process& c = StartZone("c");
  ASSERT_TRUE(cluster_.WaitHostsUp(6, 30s));
  auto r = cluster_.Cli({"formation", "create", "web", "--kind", "service", "--replicas", "6",
                         "--spread", "zone", "--env", "PGFLEET_SIM_SECONDS=1000", "--", "sleep", "1000"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  EXPECT_EQ("zone", db_.Scalar("select spread from pgfleet.formations where name = 'web'"));
  auto list = cluster_.Cli({"formation", "list", "--json"});
  EXPECT_NE(std::string::npos, list.out.find("\"spread\": \"zone\"")) << list.out;
  using Zones = std::map<std::string, int>;
  ASSERT_TRUE(WaitFor([&] { return Running("web") == Zones{{"a", 2}, {"b", 2}, {"c", 2}}; }, 30s))
      << "running per zone: " << ::testing::PrintToString(Running("web"));

  // Zone c goes away: its two replicas are replaced, one in a and one in b.
  c.Kill9();
  ASSERT_TRUE(WaitFor([&] { return Running("web") == Zones{{"a", 3}, {"b", 3}}; }, 60s))
      << "running per zone: " << ::testing::PrintToString(Running("web"));
}

TEST_F(SpreadTest, SpreadHostPutsThreeReplicasOnThreeHostsAndPackingDoesNot) {
  StartZone("a");
  StartZone("b");
  ASSERT_TRUE(cluster_.WaitHostsUp(4, 30s));
  ASSERT_EQ(0, cluster_.Cli({"formation", "create", "spread", "--kind", "service", "--replicas",
                             "3", "--spread", "host", "--env", "PGFLEET_SIM_SECONDS=1000", "--", "sleep", "1000"})
                   .exit_code);
  ASSERT_EQ(0, cluster_.Cli({"formation", "create", "packed", "--kind", "service", "--replicas",
                             "3", "--env", "PGFLEET_SIM_SECONDS=1000", "--", "sleep", "1000"})
                   .exit_code);
  ASSERT_TRUE(WaitFor([&] { return Running("spread", true).size() == 3; }, 30s))
      << ::testing::PrintToString(Running("spread", true));
  for (const auto& [host, n] : Running("spread", true)) EXPECT_EQ(1, n) << host;
  ASSERT_TRUE(WaitFor(
      [&] {
        int n = 0;
        for (const auto& [host, count] : Running("packed", true)) n += count;
        return n == 3;
      },
      30s));
  EXPECT_EQ(1u, Running("packed", true).size()) << "packing puts all three on one host";
}

TEST_F(SpreadTest, ABadSpreadIsRefusedNamingTheRuleAndChangesNothing) {
  for (const std::string& bad : std::vector<std::string>{"", "zone name", "zone;drop", std::string(64, 'z')}) {
    const std::string name = bad.empty() ? "packed" : "bad";
    auto r = cluster_.Cli({"formation", "create", name, "--kind", "service", "--replicas", "1",
                           "--spread", bad, "--", "true"});
    if (bad.empty()) {
      // An empty --spread is no spread (packed).
      EXPECT_EQ(0, r.exit_code) << r.err;
      EXPECT_EQ("", db_.Scalar("select spread from pgfleet.formations where name = 'packed'"));
      continue;
    }
    EXPECT_NE(0, r.exit_code) << bad;
    EXPECT_NE(std::string::npos, r.err.find("spread must be host or a host label key")) << r.err;
    EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.formations where name = 'bad'")) << bad;
  }
  auto sql = [&](const std::string& value) {
    try {
      db_.Scalar("update pgfleet.formations set spread = " + value + " where name = 'default'");
      return std::string();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  };
  EXPECT_NE(std::string::npos, sql("'a b'").find("spread must be host")) << sql("'a b'");
  EXPECT_EQ("", sql("'rack'"));
  EXPECT_EQ("", sql("null"));
}

}  // namespace
}  // namespace pgfleet::testing
