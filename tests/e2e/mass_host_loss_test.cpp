// Hosts that stop heartbeating at once while hostd stays alive (their
// database login refused and their sessions ended, as a pooler or a network
// path between the hosts and PostgreSQL fails): the scheduler's sweep treats
// 10 of 10 as a control-plane outage and declares none lost, says so where an
// operator looks, and judges hosts one by one again once heartbeats resume;
// 2 of 10 are lost as before. Hollow hosts (pgfleet-hostd --simulate) in real
// processes, a real scheduler, TTL 3 s.

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <thread>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class MassHostLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_.Scalar("update pgfleet.settings set value = '3' where name = 'host_ttl_seconds'");
    cluster_.StartScheduler("s1", {"--host-ttl", "3"});
  }
  void TearDown() override {
    if (HasFailure()) std::cout << cluster_.Logs();
  }

  // n hollow hosts <prefix>1..<prefix>n (Cluster::StartHollowHosts); their login.
  std::string StartHosts(const std::string& prefix, int n) {
    std::string login;
    cluster_.StartHollowHosts(prefix, n, {"--cpu", "1000", "--memory", "1024"}, &login);
    return login;
  }
  // The hosts of `login` can no longer reach the database; hostd runs on.
  void Cut(const std::string& login) {
    db_.Scalar("alter role " + login + " nologin");
    db_.Scalar("select count(pg_terminate_backend(pid)) from pg_stat_activity where usename = '" +
               login + "'");
  }
  void Heal(const std::string& login) { db_.Scalar("alter role " + login + " login"); }
  long long Alive() {
    return db_.Count("select count(*) from pgfleet.host_status where alive and state = 'up'");
  }
  long long Lost() {
    return db_.Count("select count(*) from pgfleet.hosts where state = 'lost' or lost_at is not null");
  }
  // The scheduler's /metrics.
  std::string Metrics() {
    httplib::Client client(db_.Scalar("select metrics_url from pgfleet.schedulers where id = 's1'"));
    auto res = client.Get("/metrics");
    return res && res->status == 200 ? res->body : "";
  }

  TestDatabase db_;
  Cluster cluster_{db_};
};

TEST_F(MassHostLossTest, TenOfTenSilentAtOnceAreNotDeclaredLostAndTheSweepSaysWhy) {
  std::string login = StartHosts("a-", 10);
  ASSERT_TRUE(WaitFor([&] { return Alive() == 10; }, 30s));

  Cut(login);
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Scalar("select held_hosts from pgfleet.host_loss_guard") == "10"; }, 20s))
      << db_.Scalar("select string_agg(id || ' ' || heartbeat_age_s, ', ') from pgfleet.host_status");
  EXPECT_EQ(db_.Scalar("select string_agg(kind || ': ' || detail, '; ') from pgfleet.host_loss_events"),
            "held: 10 of 10 hosts missed heartbeats at once: treating it as a control-plane "
            "outage; none is declared lost until heartbeats resume (host_loss_guard_share 0.55, "
            "host_loss_guard_min_hosts 3)");
  EXPECT_EQ(db_.Scalar("select host_loss_held_hosts from pgfleet.cluster_summary"), "10");
  EXPECT_TRUE(WaitFor(
      [&] {
        return Metrics().find("pgfleet_scheduler_host_loss_held_hosts 10") != std::string::npos;
      },
      5s))
      << Metrics();
  // Sampled for two more TTLs of silence: still nobody is lost.
  bool none_lost = true;
  for (int i = 0; i < 60 && none_lost; ++i) {
    none_lost = Lost() == 0;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(none_lost);
  EXPECT_NE(cluster_.Logs().find("10 of 10 hosts missed heartbeats at once"), std::string::npos);

  // Heartbeats resume: the hold ends, recorded, and no host was ever lost.
  Heal(login);
  ASSERT_TRUE(WaitFor([&] { return Alive() == 10; }, 30s));
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Scalar("select held_since is null from pgfleet.host_loss_guard") == "t"; },
      10s));
  EXPECT_EQ(db_.Count("select count(*) from pgfleet.host_loss_events where kind = 'resumed'"), 1);
  EXPECT_EQ(Lost(), 0);
  EXPECT_TRUE(WaitFor(
      [&] { return Metrics().find("pgfleet_scheduler_host_loss_held_hosts 0") != std::string::npos; },
      5s));

}

TEST_F(MassHostLossTest, TwoOfTenSilentAreLostAsBefore) {
  StartHosts("a-", 8);
  std::string cut = StartHosts("b-", 2);
  ASSERT_TRUE(WaitFor([&] { return Alive() == 10; }, 30s));

  Cut(cut);
  ASSERT_TRUE(WaitFor([&] { return Lost() == 2; }, 20s));
  EXPECT_EQ(db_.Scalar("select string_agg(id, ',' order by id) from pgfleet.hosts where state = 'lost'"),
            "b-1,b-2");
  EXPECT_EQ(db_.Count("select count(*) from pgfleet.host_loss_events"), 0);
  EXPECT_EQ(Alive(), 8);
}

}  // namespace
}  // namespace pgfleet::testing
