// The command line both daemons share (core/daemon): usage errors exit 2 and
// name the flag or file, a --config file sets the same options as the command
// line (which wins), /health is served on --listen, SIGTERM stops cleanly.

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>

#include <fstream>
#include <regex>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class DaemonFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_ = dir_.path() + "/token";
    std::ofstream(token_) << "flags-test-token\n";
  }
  std::string WriteConfig(const std::string& name, const std::string& text) {
    std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // The port a daemon logged it serves on ("... on 127.0.0.1:PORT"), or 0.
  static int LoggedPort(const Process& p) {
    std::smatch m;
    std::string log = p.Log();
    if (std::regex_search(log, m, std::regex("on 127\\.0\\.0\\.1:([0-9]+)")))
      return std::stoi(m[1]);
    return 0;
  }

  TempDir dir_;
  std::string token_;
};

TEST_F(DaemonFlagsTest, BadFlagsExitWith2AndNameTheFlagOrFile) {
  struct Case {
    std::string binary;
    std::vector<std::string> args;
    std::string named;  // what stderr must mention
  };
  std::string bad_config = WriteConfig("bad.conf", "tick = 1\nno-such-option = 3\n");
  // A bad line of a config file is named by file, line and option.
  std::string bad_value = WriteConfig("value.conf", "# a comment\n\ncpu = lots\n");
  std::string no_equals = WriteConfig("noeq.conf", "id = h\ndriver process\n");
  std::string bad_switch = WriteConfig("switch.conf", "id = h\ndb-pooled = maybe\n");
  std::vector<Case> cases = {
      {"pgfleet-schedulerd", {"--token-file", token_, "--tick", "0"}, "--tick"},
      {"pgfleet-schedulerd", {"--token-file", token_, "--batch-size", "-1"}, "--batch-size"},
      {"pgfleet-schedulerd", {"--token-file", token_, "--retain", "5x"}, "--retain"},
      {"pgfleet-schedulerd",
       {"--token-file", token_, "--dispatch-timeout", "0"},
       "--dispatch-timeout"},
      {"pgfleet-schedulerd",
       {"--token-file", token_, "--dispatch-timeout", "1.5s"},
       "--dispatch-timeout must be whole seconds from 1s to 5m"},
      {"pgfleet-schedulerd",
       {"--token-file", token_, "--dispatch-timeout", "10m"},
       "--dispatch-timeout must be whole seconds from 1s to 5m"},
      {"pgfleet-schedulerd", {"--token-file", token_, "--listen", "nocolon"}, "--listen"},
      {"pgfleet-schedulerd", {"--token-file", token_, "--log-level", "loud"}, "--log-level"},
      {"pgfleet-schedulerd", {"--token-file", dir_.path() + "/missing"}, "--token-file"},
      {"pgfleet-schedulerd", {"--config", dir_.path() + "/missing.conf"}, "missing.conf"},
      {"pgfleet-schedulerd",
       {"--config", bad_config},
       "bad.conf line 2: unknown option \"no-such-option\""},
      {"pgfleet-schedulerd", {"--bogus"}, "bogus"},
      {"pgfleet-hostd", {"--token-file", token_}, "--id"},
      {"pgfleet-hostd", {"--id", "h", "--token-file", token_, "--cpu", "-5"}, "--cpu"},
      {"pgfleet-hostd", {"--id", "h", "--token-file", token_, "--label", "x"}, "--label"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--driver", "process", "--data-dir",
        dir_.path() + "/h", "--listen", "h:p"},
       "--listen"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--data-dir", dir_.path() + "/h", "--driver", "kvm"},
       "--driver"},
      {"pgfleet-hostd", {"--id", "h", "--token-file", token_, "--config", bad_config}, "bad.conf"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--config", bad_value},
       "value.conf line 3: option \"cpu\""},
      {"pgfleet-hostd",
       {"--token-file", token_, "--config", no_equals},
       "noeq.conf line 2: expected `name = value` (got \"driver process\")"},
      {"pgfleet-hostd",
       {"--token-file", token_, "--config", bad_switch},
       "switch.conf line 2: option \"db-pooled\""},
      // Durations: one syntax everywhere (500ms, 2s, 1.5, 10m, 2h, 7d).
      {"pgfleet-schedulerd",
       {"--token-file", token_, "--tick", "2x"},
       "--tick must be a positive duration"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--heartbeat-interval", "1x"},
       "--heartbeat-interval must be a positive duration"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--reconcile-interval", "0"},
       "--reconcile-interval must be a positive duration"},
      // A connection string libpq cannot parse is a usage error, not an outage.
      {"pgfleet-schedulerd", {"--token-file", token_, "--db", "\"host=127.0.0.1\""}, "--db"},
      {"pgfleet-hostd", {"--id", "h", "--token-file", token_, "--db", "host=x port"}, "--db"},
      // Jobs fenced 2.5 s after the last heartbeat: no room for two heartbeats of 2 s.
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--host-ttl", "3", "--heartbeat-interval", "2"},
       "at least 2 x --heartbeat-interval"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--log-forward", "syslog://127.0.0.1"},
       "--log-forward needs a port: syslog://HOST:PORT (got 'syslog://127.0.0.1')"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--log-forward", "kafka://broker:9092"},
       "--log-forward must be journald or syslog://HOST:PORT"},
      // The user namespace range: never a host account's ids, never past 2^31 - 1.
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--job-ids", "lots"},
       "--job-ids must be START:COUNT with START and COUNT in decimal (got \"lots\")"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--job-ids", "1000:65536"},
       "START at least 65536"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--job-ids", "100000:1000"},
       "COUNT at least 65536"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--job-ids", "2147480000:65536"},
       "START + COUNT - 1 at most 2147483647"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--job-ids", "4294967296:65536"},
       "START + COUNT - 1 at most 2147483647"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--job-ids", "-100000:65536"},
       "in decimal"},
      // Networking (hostd/network/): the port range, the bridge's subnet, the CNI directories.
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--port-range", "lots"},
       "--port-range must be LO-HI with two port numbers (got \"lots\")"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--port-range", "20000-"},
       "--port-range must be LO-HI with two port numbers"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--port-range", "-1-80"},
       "--port-range must be LO-HI with two port numbers"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--port-range", "30000-20000"},
       "--port-range must be LO-HI with LO <= HI (got \"30000-20000\")"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--port-range", "80-8080"},
       "--port-range must be LO-HI with both from 1024 to 65535"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--port-range", "20000-99999"},
       "--port-range must be LO-HI with both from 1024 to 65535"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--port-range", "20000-4294987296"},
       "--port-range must be LO-HI with two port numbers"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--bridge-subnet", "10.89.0.0"},
       "--bridge-subnet must be an IPv4 CIDR such as 10.89.0.0/16 (got \"10.89.0.0\")"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--bridge-subnet", "10.89.0.0/33"},
       "--bridge-subnet must be a CIDR with a prefix length from 8 to 30"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--bridge-subnet", "10.89.0.1/16"},
       "--bridge-subnet must be a network address, with no host bits set"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--bridge-subnet", "fd00::/64"},
       "--bridge-subnet must be an IPv4 CIDR"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--bridge-subnet", "$(reboot)/16"},
       "--bridge-subnet must be an IPv4 CIDR"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--cni-config", "relative/dir"},
       "--cni-config must be an absolute directory (got \"relative/dir\")"},
      {"pgfleet-hostd",
       {"--id", "h", "--token-file", token_, "--cni-bin-dir", "bin"},
       "--cni-bin-dir must be an absolute directory (got \"bin\")"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {BinaryPath(c.binary)};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    auto r = testing::Run(argv, {}, 30s);
    std::string what = c.binary + " " + c.args.back();
    EXPECT_EQ(2, r.exit_code) << what << ": " << r.err;
    EXPECT_NE(std::string::npos, r.err.find(c.named)) << what << ": " << r.err;
    EXPECT_NE(std::string::npos, r.err.find("usage: " + c.binary)) << what << ": " << r.err;
  }
}

// Without --config a daemon reads /etc/pgfleet/<program>.conf when it exists
// ($PGFLEET_CONFIG_DIR in place of /etc/pgfleet), and a command-line flag
// still wins over it.
TEST_F(DaemonFlagsTest, TheDefaultConfigFileIsReadWhenItExists) {
  TempDir etc;
  {
    std::ofstream f(etc.path() + "/pgfleet-schedulerd.conf");
    f << "# the operator's file\nbatch-size = lots\n";
  }
  auto bad = testing::Run({BinaryPath("pgfleet-schedulerd"), "--token-file", token_},
                          {"PGFLEET_CONFIG_DIR=" + etc.path()}, 30s);
  EXPECT_EQ(2, bad.exit_code) << bad.err;
  EXPECT_NE(std::string::npos,
            bad.err.find("--config " + etc.path() + "/pgfleet-schedulerd.conf line 2"))
      << bad.err;
  EXPECT_NE(std::string::npos, bad.err.find("option \"batch-size\"")) << bad.err;
  // The same flag on the command line wins: the file's value is not even read.
  auto flag_wins = testing::Run(
      {BinaryPath("pgfleet-schedulerd"), "--token-file", token_, "--batch-size", "5", "--help"},
      {"PGFLEET_CONFIG_DIR=" + etc.path()}, 30s);
  EXPECT_EQ(0, flag_wins.exit_code) << flag_wins.err;
}

TEST_F(DaemonFlagsTest, HelpPrintsEveryFlagAndExits0) {
  auto s = testing::Run({BinaryPath("pgfleet-schedulerd"), "--help"}, {}, 30s);
  EXPECT_EQ(0, s.exit_code);
  for (const char* flag :
       {"--db", "--id", "--listen", "--token-file", "--log-level", "--config", "--tick",
        "--batch-size", "--host-ttl", "--retain", "--dispatch-timeout"})
    EXPECT_NE(std::string::npos, s.out.find(flag)) << flag;
  auto h = testing::Run({BinaryPath("pgfleet-hostd"), "--help"}, {}, 30s);
  EXPECT_EQ(0, h.exit_code);
  for (const char* flag :
       {"--db", "--id", "--listen", "--token-file", "--log-level", "--config", "--advertise",
        "--driver", "--cpu", "--memory", "--label", "--heartbeat-interval", "--reconcile-interval",
        "--host-ttl", "--self-fence", "--self-fence-shims", "--data-dir", "--db-pooled"})
    EXPECT_NE(std::string::npos, h.out.find(flag)) << flag;
}

TEST_F(DaemonFlagsTest, ConfigFileSetsOptionsTheCommandLineOverridesAndHealthIsServed) {
  TestDatabase db;
  std::string conf = WriteConfig(
      "scheduler.conf",
      "db = " + db.dsn() + "\nid = from-config\ntoken-file = " + token_ + "\ntick = 2s\n");
  Process from_file({BinaryPath("pgfleet-schedulerd"), "--config", conf},
                    dir_.path() + "/from-file.log");
  Process overridden({BinaryPath("pgfleet-schedulerd"), "--config", conf, "--id", "from-cli"},
                     dir_.path() + "/overridden.log");
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.schedulers"
                   " where id in ('from-config', 'from-cli')") == 2;
      },
      20s))
      << from_file.Log() << overridden.Log();

  int port = 0;
  ASSERT_TRUE(WaitFor([&] { return (port = LoggedPort(from_file)) > 0; }, 10s)) << from_file.Log();
  httplib::Client client("127.0.0.1", port);
  auto res = client.Get("/health");
  ASSERT_TRUE(res) << from_file.Log();
  EXPECT_EQ(200, res->status);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(200, metrics->status);

  int status = from_file.Stop(10s);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << from_file.Log();
  EXPECT_NE(std::string::npos, from_file.Log().find("scheduler=from-config stopped"));
}

TEST_F(DaemonFlagsTest, HostdReadsItsConfigFileAndStopsOnSigterm) {
  TestDatabase db;
  std::string conf =
      WriteConfig("host.conf", "db = " + db.dsn() + "\nid = conf-host\ntoken-file = " + token_ +
                                   "\ndriver = process\ncpu = 1000\nmemory = 512\n"
                                   "heartbeat-interval = 500ms\nhost-ttl = 10s\n"
                                   "reconcile-interval = 1s\nlabel = zone=c\ndata-dir = " +
                                   dir_.path() + "/conf-host\n");
  Process host({BinaryPath("pgfleet-hostd"), "--config", conf}, dir_.path() + "/host.log");
  ASSERT_TRUE(WaitFor(
      [&] {
        return db.Count(
                   "select count(*) from pgfleet.hosts where id = 'conf-host'"
                   " and cpu = 1000 and memory = 512 and labels->>'zone' = 'c'") == 1;
      },
      20s))
      << host.Log();
  int status = host.Stop(10s);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << host.Log();
}

}  // namespace
}  // namespace pgfleet::testing
