#pragma once
// The fixture of the bridge network's end-to-end tests
// (bridge_network_*_test.cpp): PostgreSQL, pgfleet-schedulerd and
// pgfleet-hostd --driver container with --cni-config pointing at a network
// configuration list the test writes: a bridge, subnet, network name and
// host-local address directory of the test's own, so tests never disturb
// each other, another hostd, or the machine's default (pgfleet0). Jobs run
// in a busybox rootfs (scripts/make-rootfs): httpd serves, wget fetches.
//
// Needs root, the container driver, the CNI plugins bridge, host-local,
// portmap and firewall in /usr/lib/cni (Debian containernetworking-plugins),
// iptables, and a kernel that makes bridges and veths: without one of them
// each test SKIPS, saying which. Leaks() counts what an attempt's network
// could leave: veths on the bridge, address files, iptables rules naming
// the attempts' container IDs or addresses, pinned namespaces, saved
// attachments.

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "container_e2e_fixture.h"
#include "core/util/text.h"
#include "hostd/drivers/container/container.h"
#include "hostd/network/attachment.h"
#include "hostd/network/cni_config.h"
#include "test_support.h"

namespace pgfleet::testing::bridge_e2e {

using namespace std::chrono_literals;

inline const char* kCniBin = "/usr/lib/cni";

inline bool Executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// Why the bridge cannot run here ("" when it can).
inline std::string BridgeUnavailable() {
  if (geteuid() != 0) return "the bridge network tests need root (CI has it)";
  std::string why;
  if (!hostd::ContainerDriverAvailable(&why)) return "container driver unavailable: " + why;
  for (const char* p : {"bridge", "host-local", "portmap", "firewall"}) {
    if (!Executable(std::string(kCniBin) + "/" + p)) {
      return std::string("CNI plugin ") + p + " not in " + kCniBin +
             " (install containernetworking-plugins: scripts/install-deps)";
    }
  }
  if (!Executable("/usr/sbin/iptables") && !Executable("/sbin/iptables")) {
    return "iptables is not installed (scripts/install-deps)";
  }
  const std::string probe = "pgfp" + std::to_string(getpid() % 100000);
  auto r = pgfleet::testing::Run({"/usr/sbin/ip", "link", "add", probe, "type", "bridge"}, {}, 10s);
  if (r.exit_code != 0) return "this kernel cannot make a bridge: " + r.err;
  pgfleet::testing::Run({"/usr/sbin/ip", "link", "del", probe}, {}, 10s);
  return "";
}

class BridgeNetworkTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    unavailable_ = BridgeUnavailable();
    if (!unavailable_.empty()) return;
    rootfs_error_ = container_e2e::MakeBusyboxRootfs(&rootfs_parent_, &rootfs_);
  }
  static void TearDownTestSuite() { rootfs_parent_.reset(); }

  void SetUp() override {
    if (!unavailable_.empty()) GTEST_SKIP() << unavailable_;
    ASSERT_TRUE(rootfs_error_.empty()) << rootfs_error_;
    static int n = 0;
    ++n;
    const int id = getpid() % 100000;
    bridge_ = "pgft" + std::to_string(id) + "x" + std::to_string(n % 10);
    network_ = "pgfleet-test-" + std::to_string(getpid()) + "-" + std::to_string(n);
    // 10.234.0.0/16 is the tests': a /24 per process, away from the default 10.89.0.0/16.
    prefix_ = "10.234." + std::to_string(id % 250) + ".";
    cluster_ = std::make_unique<Cluster>(db_);
    conf_dir_ = cluster_->dir() + "/cni-conf";
    ipam_dir_ = cluster_->dir() + "/cni-ipam";
    mkdir(conf_dir_.c_str(), 0700);
    hostd::network::DefaultNetwork net;
    net.name = network_;
    net.bridge = bridge_;
    net.subnet = prefix_ + "0/24";
    net.ipam_dir = ipam_dir_;
    std::ofstream(conf_dir_ + "/50-test.conflist") << hostd::network::DefaultConfList(net).dump(2);
    cluster_->StartScheduler("s1");
    host_ = "br" + std::to_string(getpid()) + "-" + std::to_string(n);
    if (!start_host_) return;
    StartHost();
    ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
  }

  void TearDown() override {
    if (!cluster_) return;
    if (HasFailure()) std::cerr << cluster_->Logs() << ShimLog();
    cluster_.reset();
    pgfleet::testing::Run({"/usr/sbin/ip", "link", "del", bridge_}, {}, 10s);
  }

  Process& StartHost(std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {"--driver", "container", "--cni-config", conf_dir_};
    flags.insert(flags.end(), extra.begin(), extra.end());
    host_proc_ = &cluster_->StartHost(host_, 4000, 4000, flags);
    return *host_proc_;
  }
  std::string DataDir() const { return cluster_->dir() + "/" + host_; }
  std::string ShimLog() const {
    return "---- shim.log\n" + util::ReadFileOrEmpty(DataDir() + "/shim.log");
  }

  // Inserts a bridge job running `script` under sh in the busybox rootfs.
  std::string SubmitBridge(const std::string& script, int cpu = 250,
                           const std::string& ports = "") {
    return db_.Scalar(
        "insert into pgfleet.jobs (command, rootfs, network, cpu, memory, ports) values "
        "(array['sh', '-c', " +
        Quote(script) + "], " + Quote(rootfs_) + ", 'bridge', " + std::to_string(cpu) + ", 64, " +
        (ports.empty() ? "null" : Quote(ports) + "::jsonb") + ") returning id");
  }
  static std::string Quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
  }
  std::string Job(const std::string& id, const std::string& column) {
    return db_.Scalar("select " + column + " from pgfleet.jobs where id = " + id);
  }
  bool WaitState(const std::string& id, const std::string& state,
                 std::chrono::milliseconds timeout = 60s) {
    return WaitFor([&] { return Job(id, "state") == state; }, timeout);
  }
  // A job serving "hello <job id>" over HTTP on `port` of its own address
  // (a number, or a variable of its environment such as $PGFLEET_PORT_HTTP).
  static std::string Server(const std::string& port = "8080") {
    return "mkdir -p /tmp/www && echo hello $PGFLEET_JOB_ID > /tmp/www/index.html && "
           "echo addr=$PGFLEET_ADDR_HTTP && exec httpd -f -p " +
           port + " -h /tmp/www";
  }
  // What curl from the host gets from url ("" on failure).
  static std::string Curl(const std::string& url) {
    auto r = pgfleet::testing::Run(
        {"/usr/bin/curl", "-s", "--max-time", "5", "--noproxy", "*", url}, {}, 10s);
    return r.exit_code == 0 ? util::Trim(r.out) : "";
  }

  // What the attempts' networks left, one line each; "" when nothing.
  std::string Leaks() {
    std::string out;
    for (const auto& veth : Files("/sys/class/net/" + bridge_ + "/brif")) {
      out += "veth " + veth + " on " + bridge_ + "\n";
    }
    if (DIR* d = opendir((ipam_dir_ + "/" + network_).c_str())) {
      while (dirent* e = readdir(d)) {
        std::string f = e->d_name;
        if (f == "." || f == ".." || f == "lock" || f.rfind("last_reserved_ip", 0) == 0) continue;
        out += "address file " + f + "\n";
      }
      closedir(d);
    }
    const std::string id_prefix = "pgfleet-" + hostd::CgroupScopeOf(DataDir()) + "-";
    for (const char* table : {"nat", "filter"}) {
      auto r = pgfleet::testing::Run({"/usr/sbin/iptables-save", "-t", table}, {}, 30s);
      for (const auto& line : container_e2e::Lines(r.out)) {
        if (line.find(id_prefix) != std::string::npos || line.find(prefix_) != std::string::npos) {
          out += std::string("iptables ") + table + ": " + line + "\n";
        }
      }
    }
    for (const auto& f : Files(DataDir() + "/" + hostd::network::kNetnsDir)) {
      out += "pinned namespace " + f + "\n";
    }
    for (const auto& dir : Subdirs(DataDir() + "/jobs")) {
      struct stat st;
      const std::string saved = DataDir() + "/jobs/" + dir + "/" + hostd::network::kAttachmentFile;
      if (lstat(saved.c_str(), &st) == 0) out += "saved attachment " + saved + "\n";
    }
    return out;
  }
  static std::vector<std::string> Files(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string f = e->d_name;
        if (f != "." && f != "..") out.push_back(f);
      }
      closedir(d);
    }
    return out;
  }

  static inline std::string unavailable_;
  static inline std::unique_ptr<TempDir> rootfs_parent_;
  static inline std::string rootfs_;
  static inline std::string rootfs_error_;

  bool start_host_ = true;  // SetUp starts the bridge host (a derived fixture may not)
  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  std::string host_, bridge_, network_, prefix_, conf_dir_, ipam_dir_;
  Process* host_proc_ = nullptr;
};

}  // namespace pgfleet::testing::bridge_e2e
