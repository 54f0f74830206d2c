// Network "bridge" end to end (hostd/network/, docs/networking.md): jobs
// on one host reach each other's bridge addresses, the address reaches
// pgfleet.jobs, and every end of an attempt takes its network down (DEL),
// also after hostd was SIGKILLed, so nothing leaks however many jobs ran.
// The fixture (bridge_network_fixture.h) says what it needs and skips
// without it.

#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "bridge_network_fixture.h"

namespace pgfleet::testing::bridge_e2e {
namespace {

TEST_F(BridgeNetworkTest, TwoBridgeJobsReachEachOtherAtTheirAddressesAndTheHostAtItsPort) {
  // A listens on the host port it is given, mapped to the same port of its address.
  const std::string a = SubmitBridge(Server("$PGFLEET_PORT_HTTP"), 250, R"({"http": 0})");
  ASSERT_TRUE(WaitState(a, "running")) << Job(a, "state") << " " << Job(a, "error");
  const std::string addr = Job(a, "host(address)");
  ASSERT_EQ(0u, addr.rfind(prefix_, 0)) << "address " << addr << " is not on " << prefix_ << "0/24";
  const std::string port = Job(a, "host_ports ->> 'http'");
  ASSERT_FALSE(port.empty()) << "no host port given: " << Job(a, "host_ports");
  const std::string at = addr + ":" + port;
  // From the host, through the bridge (its gateway address).
  ASSERT_TRUE(WaitFor([&] { return Curl("http://" + at + "/") == "hello " + a; }, 20s))
      << Curl("http://" + at + "/");
  // From the host's loopback, through the port mapping (portmap).
  EXPECT_EQ("hello " + a, Curl("http://127.0.0.1:" + port + "/"));

  // From another job, at the address pgfleet.jobs shows.
  const std::string b = SubmitBridge("wget -q -O - http://" + at + "/ && echo got-it");
  ASSERT_TRUE(WaitState(b, "succeeded"))
      << Job(b, "state") << " " << Job(b, "error") << " " << Job(b, "output_tail");
  EXPECT_NE(std::string::npos, Job(b, "output_tail").find("hello " + a)) << Job(b, "output_tail");
  EXPECT_NE(Job(b, "host(address)"), addr) << "two live jobs were given one address";

  // What Leaks() counts is there while the job runs: its veth, address
  // file, rules, pinned namespace and saved attachment.
  const std::string live = Leaks();
  for (const char* kind : {"veth ", "address file ", "iptables nat: ", "iptables filter: ",
                           "pinned namespace ", "saved attachment "}) {
    EXPECT_NE(std::string::npos, live.find(kind)) << kind << "not seen in\n" << live;
  }
  ASSERT_EQ(0, cluster_->Cli({"stop", a}).exit_code);
  ASSERT_TRUE(WaitFor([&] { return Job(a, "state") != "running"; }, 30s));
  EXPECT_NE(std::string::npos, Job(a, "output_tail").find("addr=127.0.0.1:" + port))
      << "PGFLEET_ADDR_HTTP is not the host's advertised address and port: "
      << Job(a, "output_tail");
  std::string left;
  EXPECT_TRUE(WaitFor([&] { return (left = Leaks()).empty(); }, 20s)) << left;
}

TEST_F(BridgeNetworkTest, BridgeJobSeesOnlyItsOwnNetworkAndLoopback) {
  const std::string id = SubmitBridge("ip -o addr | awk '{print $2, $4}'; ip route");
  ASSERT_TRUE(WaitState(id, "succeeded")) << Job(id, "error") << Job(id, "output_tail");
  const std::string out = Job(id, "output_tail");
  EXPECT_NE(std::string::npos, out.find("127.0.0.1/8")) << out;
  EXPECT_NE(std::string::npos, out.find(Job(id, "host(address)") + "/24")) << out;
  EXPECT_NE(std::string::npos, out.find("default via " + prefix_ + "1")) << out;
  std::string left;
  EXPECT_TRUE(WaitFor([&] { return (left = Leaks()).empty(); }, 20s)) << left;
}

TEST_F(BridgeNetworkTest, HostdKilledWithFiveBridgeJobsKeepsTheirNetworkAndLeavesNothing) {
  std::vector<std::string> ids, addrs;
  for (int i = 0; i < 5; ++i) ids.push_back(SubmitBridge(Server()));
  for (const auto& id : ids) {
    ASSERT_TRUE(WaitState(id, "running")) << id << ": " << Job(id, "error");
    addrs.push_back(Job(id, "host(address)"));
    ASSERT_TRUE(
        WaitFor([&] { return Curl("http://" + addrs.back() + ":8080/") == "hello " + id; }, 20s))
        << id << " at " << addrs.back();
  }

  host_proc_->Kill9();
  // While hostd is down, one attempt's shim dies too: its job goes with the
  // restarted hostd's recovery, which must take its network down itself.
  const std::string victim_dir = DataDir() + "/jobs/" + ids[0] + "-1";
  std::ifstream state(victim_dir + "/state.jsonl");
  std::string first;
  std::getline(state, first);
  const auto started = nlohmann::json::parse(first);
  ASSERT_EQ("started", started.value("kind", ""));
  ASSERT_EQ(0, kill(started.at("shim_pid").get<pid_t>(), SIGKILL));

  StartHost();
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  // Its attempt is lost (the host-loss rule may start another); the
  // restarted hostd took its network down itself.
  ASSERT_TRUE(WaitFor(
      [&] { return Job(ids[0], "attempt") != "1" || Job(ids[0], "state") == "failed"; }, 30s))
      << Job(ids[0], "state") << " " << Job(ids[0], "error");
  struct stat st;
  EXPECT_NE(0, lstat((victim_dir + "/" + hostd::network::kAttachmentFile).c_str(), &st))
      << "the lost attempt's network was not taken down by the restarted hostd";
  for (size_t i = 1; i < ids.size(); ++i) {
    EXPECT_EQ("running", Job(ids[i], "state")) << ids[i];
    EXPECT_EQ("hello " + ids[i], Curl("http://" + addrs[i] + ":8080/"))
        << ids[i] << " lost its network across the hostd restart";
  }
  // The restarted hostd checked the adopted attempts' networks (CNI CHECK).
  auto checked = [&](const std::string& what) {
    std::string log = host_proc_->Log();
    size_t n = 0;
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_TRUE(WaitFor([&] { return checked("network as it was set up (CNI CHECK)") == 4; }, 20s))
      << host_proc_->Log();
  EXPECT_EQ(0u, checked("network not as it was set up"));
  for (const auto& id : ids) ASSERT_EQ(0, cluster_->Cli({"stop", id}).exit_code);
  for (const auto& id : ids) {
    ASSERT_TRUE(WaitFor(
        [&] {
          std::string s = Job(id, "state");
          return s != "running" && s != "assigned" && s != "pending";
        },
        30s))
        << id << ": " << Job(id, "state");
  }
  std::string left;
  EXPECT_TRUE(WaitFor([&] { return (left = Leaks()).empty(); }, 20s)) << left;
}

TEST_F(BridgeNetworkTest, TwoHundredShortBridgeJobsLeaveNoVethAddressOrRule) {
  // 400 millicores each on a 4000-millicore host: ten at a time.
  db_.Scalar(
      "insert into pgfleet.jobs (command, rootfs, network, cpu, memory) "
      "select array['sh', '-c', 'ip -o -4 addr show eth0'], " +
      Quote(rootfs_) + ", 'bridge', 400, 32 from generate_series(1, 200)");
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_.Count(
                   "select count(*) from pgfleet.jobs where state in "
                   "('succeeded', 'failed', 'cancelled')") == 200;
      },
      600s))
      << db_.Scalar(
             "select string_agg(state || ':' || n, ', ') from (select state, count(*) n "
             "from pgfleet.jobs group by state) s");
  EXPECT_EQ(200, db_.Count("select count(*) from pgfleet.jobs where state = 'succeeded'"))
      << db_.Scalar(
             "select string_agg(distinct coalesce(error, ''), ' | ') from pgfleet.jobs "
             "where state <> 'succeeded'");
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs where address is null"));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs where host(address) not like " +
                         Quote(prefix_ + "%")));
  std::string left;
  EXPECT_TRUE(WaitFor([&] { return (left = Leaks()).empty(); }, 30s)) << left;
}

// A host whose CNI plugins are missing offers no bridge and says why; a
// bridge job waits rather than being placed there.
class NoPluginsTest : public BridgeNetworkTest {
 protected:
  NoPluginsTest() { start_host_ = false; }
};

TEST_F(NoPluginsTest, HostWithoutPluginsRegistersWithoutBridgeAndGetsNoBridgeJob) {
  const std::string empty = cluster_->dir() + "/no-plugins";
  mkdir(empty.c_str(), 0755);
  StartHost({"--cni-bin-dir", empty});
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  EXPECT_EQ("{host,none}", db_.Scalar("select networks from pgfleet.hosts"));
  EXPECT_EQ("no bridge network: CNI plugin bridge not found in " + empty,
            db_.Scalar("select network_note from pgfleet.hosts"));

  const std::string bridge = SubmitBridge("echo should-not-run");
  // In a formation of its own: a scheduler's pass is per formation.
  const std::string none = db_.Scalar(
      "insert into pgfleet.jobs (formation, command, rootfs, network, cpu, memory) values "
      "('other', array['true'], " +
      Quote(rootfs_) + ", 'none', 250, 32) returning id");
  // The scheduler has placed what it could: the none job ran to its end.
  ASSERT_TRUE(WaitState(none, "succeeded")) << Job(none, "state") << " " << Job(none, "error");
  EXPECT_EQ("pending", Job(bridge, "state")) << Job(bridge, "error");
  EXPECT_EQ("", Job(bridge, "host_id"));
}

}  // namespace
}  // namespace pgfleet::testing::bridge_e2e
