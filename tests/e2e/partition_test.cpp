// A network partition of one host: hostd runs in a network namespace this test
// creates, joined to the test's side by a veth pair (traffic stays between the
// test and its own namespace). Cutting the link past the TTL must leave exactly
// one live attempt of the job: the cut-off host fences itself, the scheduler
// runs the job elsewhere, and the healed host comes back as a new generation
// whose stale reports change nothing.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

// Addresses of this test's own namespace link (not routed anywhere else).
constexpr const char* kRootSide = "10.250.77.1";
constexpr const char* kHostSide = "10.250.77.2";

class NetNamespace {
 public:
  NetNamespace()
      : name_("pgf-part-" + std::to_string(getpid())),
        veth_("pgfp" + std::to_string(getpid() % 100000)) {
    Ip({"netns", "add", name_});
    Ip({"link", "add", veth_ + "a", "type", "veth", "peer", "name", veth_ + "b"});
    Ip({"link", "set", veth_ + "b", "netns", name_});
    Ip({"addr", "add", std::string(kRootSide) + "/30", "dev", veth_ + "a"});
    Ip({"link", "set", veth_ + "a", "up"});
    Ip({"netns", "exec", name_, "ip", "addr", "add", std::string(kHostSide) + "/30", "dev",
        veth_ + "b"});
    Ip({"netns", "exec", name_, "ip", "link", "set", veth_ + "b", "up"});
    Ip({"netns", "exec", name_, "ip", "link", "set", "lo", "up"});
  }
  ~NetNamespace() {
    pgfleet::testing::Run({"/usr/sbin/ip", "link", "del", veth_ + "a"});
    pgfleet::testing::Run({"/usr/sbin/ip", "netns", "del", name_});
  }
  void Cut() { Ip({"link", "set", veth_ + "a", "down"}); }
  void Heal() { Ip({"link", "set", veth_ + "a", "up"}); }
  const std::string& name() const { return name_; }

 private:
  void Ip(std::vector<std::string> args) {
    args.insert(args.begin(), "/usr/sbin/ip");
    auto r = pgfleet::testing::Run(args);
    if (r.exit_code != 0) throw std::runtime_error("ip " + args[1] + " failed: " + r.err);
  }
  std::string name_, veth_;
};

TEST(PartitionTest, PartitionedHostFencesItselfAndItsJobRunsOnceElsewhere) {
  ASSERT_EQ(0u, getuid()) << "network namespaces need root (CI runs as root)";
  NetNamespace ns;
  PrivatePostgres pg(kRootSide);
  TestDatabase db(pg.admin_dsn(), true);
  Cluster cluster(db);
  cluster.StartScheduler("s1", {"--host-ttl", "3"});
  // h1 inside the namespace: it reaches PostgreSQL and is reached only over the veth link.
  std::string ns_dsn = "host=" + std::string(kRootSide) + " port=" + std::to_string(pg.port()) +
                       " user=postgres dbname=" + db.name();
  cluster.processes().push_back(
      std::make_unique<Process>(std::vector<std::string>{"/usr/sbin/ip",
                                                         "netns",
                                                         "exec",
                                                         ns.name(),
                                                         BinaryPath("pgfleet-hostd"),
                                                         "--db",
                                                         ns_dsn,
                                                         "--id",
                                                         "h1",
                                                         "--token-file",
                                                         cluster.token_file(),
                                                         "--listen",
                                                         std::string(kHostSide) + ":0",
                                                         "--driver",
                                                         "process",
                                                         "--cpu",
                                                         "1000",
                                                         "--memory",
                                                         "1000",
                                                         "--heartbeat-interval",
                                                         "0.5",
                                                         "--host-ttl",
                                                         "3",
                                                         "--data-dir",
                                                         cluster.dir() + "/h1"},
                                cluster.dir() + "/h1.log"));
  ASSERT_TRUE(cluster.WaitHostsUp(1)) << cluster.Logs();
  auto r = cluster.Cli({"run", "--", "sleep", "300"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  std::string id = util::Trim(r.out);
  ASSERT_TRUE(WaitFor(
      [&] { return db.Scalar("select state from pgfleet.jobs where id = " + id) == "running"; },
      30s))
      << cluster.Logs();
  std::string pid1 = db.Scalar("select pid from pgfleet.jobs where id = " + id);
  std::string gen1 = db.Scalar("select generation from pgfleet.hosts where id = 'h1'");
  // Only now a second host exists, outside the namespace, to take the job over.
  cluster.StartHost("h2", 1000, 1000, {"--host-ttl", "3"});
  ASSERT_TRUE(cluster.WaitHostsUp(2)) << cluster.Logs();

  ns.Cut();
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Scalar(
                   "select state || '/' || host_id || '/' || attempt from pgfleet.jobs where id "
                   "= " +
                   id) == "running/h2/2";
      },
      30s))
      << cluster.Logs();
  // The cut-off host stopped attempt 1 by itself before attempt 2 ran: never two live attempts.
  EXPECT_TRUE(ProcessGone(pid1)) << "attempt 1 (pid " << pid1 << ") still runs next to attempt 2";
  EXPECT_EQ("lost", db.Scalar("select state from pgfleet.hosts where id = 'h1'"));
  // Its hung connection (packets dropped, nothing refused) is given up within
  // seconds (tcp_user_timeout 10 s, db::DaemonDsn), not when TCP's
  // retransmissions give up some 15 minutes later.
  EXPECT_TRUE(WaitFor(
      [&] { return cluster.Logs().find("host h1: database connection lost") != std::string::npos; },
      30s))
      << cluster.Logs();

  ns.Heal();
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Scalar("select state from pgfleet.hosts where id = 'h1'") == "up" &&
               db.Scalar("select generation from pgfleet.hosts where id = 'h1'") != gen1;
      },
      30s))
      << cluster.Logs();
  // Its stale report of attempt 1's end changed nothing; attempt 2 runs on.
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(
      "running/h2/2",
      db.Scalar("select state || '/' || host_id || '/' || attempt from pgfleet.jobs where id = " +
                id));
  EXPECT_EQ(
      0, db.Count("select count(*) from pgfleet.job_events where job_id = " + id +
                  " and attempt = 1 and kind in ('succeeded', 'failed', 'requeued', 'cancelled')"));
  EXPECT_EQ(1, db.Count("select count(*) from pgfleet.job_events where job_id = " + id +
                        " and kind = 'lost'"));
  EXPECT_EQ(
      0, db.Count("select count(*) from (select attempt from pgfleet.job_events where job_id = " +
                  id + " and kind = 'running' group by 1 having count(*) > 1) x"));
  EXPECT_EQ(0, db.Count("select count(*) from pgfleet.allocation_drift"));
}

}  // namespace
}  // namespace pgfleet::testing
