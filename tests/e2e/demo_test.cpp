// scripts/demo, the README's first command (the first hour issue, items 4
// and 12): --port-base gives fixed ports, each scheduler's metrics address is
// in pgfleet.schedulers, --stop stops the cluster's jobs (not only its
// daemons), and --clean leaves nothing behind. Runs on this build
// (PGFLEET_DEMO_SKIP_BUILD) in a directory of its own (PGFLEET_DEV_DIR).

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

bool PortFree(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

// The first of four free consecutive loopback ports.
int FreePortBase() {
  for (int base = 30000 + (getpid() % 1000) * 20; base < 60000; base += 20) {
    if (PortFree(base) && PortFree(base + 1) && PortFree(base + 2) && PortFree(base + 3)) {
      return base;
    }
  }
  return 0;
}

TEST(DemoTest, FixedPortsMetricsInTheDatabaseAndStopStopsTheJobsToo) {
  TempDir tmp;
  std::string dev = tmp.path() + "/dev";
  std::string build = BinaryPath("pgfleet");
  build = build.substr(0, build.rfind('/'));
  std::vector<std::string> env = {"PGFLEET_DEV_DIR=" + dev, "PGFLEET_BUILD_DIR=" + build,
                                  "PGFLEET_DEMO_SKIP_BUILD=1", "PGFLEET_DRIVER=process"};
  const std::string demo = SourcePath("scripts/demo");
  int base = FreePortBase();
  ASSERT_GT(base, 0);

  auto bad = pgfleet::testing::Run({demo, "--port-base", "80"}, env, 30s);
  EXPECT_EQ(2, bad.exit_code);
  EXPECT_NE(std::string::npos, bad.err.find("--port-base must be")) << bad.err;

  auto up = pgfleet::testing::Run({demo, "--port-base", std::to_string(base)}, env, 180s);
  ASSERT_EQ(0, up.exit_code) << up.out << up.err;
  EXPECT_NE(std::string::npos, up.out.find("hello from pgfleet")) << up.out;
  std::string metrics = "http://127.0.0.1:" + std::to_string(base + 1);
  EXPECT_NE(std::string::npos, up.out.find(metrics + "/metrics")) << up.out;
  std::string dsn = "host=127.0.0.1 port=" + std::to_string(base) + " user=postgres dbname=pgfleet";
  pqxx::connection c(dsn);
  EXPECT_EQ(metrics, pqxx::nontransaction(c)
                         .exec1("select metrics_url from pgfleet.schedulers")[0]
                         .as<std::string>());
  for (int offset : {2, 3}) {
    EXPECT_EQ(1, pqxx::nontransaction(c)
                     .exec1("select count(*) from pgfleet.hosts where api_url = "
                            "'http://127.0.0.1:" +
                            std::to_string(base + offset) + "'")[0]
                     .as<int>());
  }
  httplib::Client scrape(metrics);
  auto res = scrape.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(std::string::npos, res->body.find("# HELP ")) << res->body;
  EXPECT_NE(std::string::npos, res->body.find("# TYPE ")) << res->body;

  // A job that would run for ten minutes.
  std::vector<std::string> cli_env = {"PGFLEET_DB=" + dsn};
  auto job =
      pgfleet::testing::Run({BinaryPath("pgfleet"), "run", "--", "sleep", "600"}, cli_env, 30s);
  ASSERT_EQ(0, job.exit_code) << job.err;
  std::string id = util::Trim(job.out);
  std::string pid;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = pqxx::nontransaction(c).exec(
            "select pid::text from pgfleet.jobs where id = " + id + " and state = 'running'");
        pid = r.empty() ? "" : r[0][0].as<std::string>();
        return !pid.empty();
      },
      30s));
  c.disconnect();

  // What the closing message tells a user to type works as written: the env
  // file lets a plain psql run sql/ops/ against this cluster, and names this
  // cluster for --stop (not the default ./.pgfleet-dev).
  EXPECT_NE(std::string::npos, up.out.find("PGFLEET_DEV_DIR=" + dev + " scripts/demo --stop"))
      << up.out;
  auto ops = pgfleet::testing::Run(
      {"/bin/bash", "-c",
       "source '" + dev + "/env' && cd '" + SourcePath("") + "' && psql -X -v job=" + id +
           " -f sql/ops/why_pending.sql && echo \"dev=$PGFLEET_DEV_DIR\""},
      {}, 30s);
  EXPECT_EQ(0, ops.exit_code) << ops.out << ops.err;
  EXPECT_NE(std::string::npos, ops.out.find("(1 row)")) << ops.out;
  EXPECT_NE(std::string::npos, ops.out.find("dev=" + dev)) << ops.out;
  // scripts/make-rootfs without DEST builds where the demo's hosts look.
  auto rootfs = pgfleet::testing::Run({SourcePath("scripts/make-rootfs"), "busybox"},
                                      {"PGFLEET_DEV_DIR=" + dev}, 120s);
  EXPECT_EQ(0, rootfs.exit_code) << rootfs.out << rootfs.err;
  for (const char* host : {"host-1", "host-2"}) {
    const std::string sh = dev + "/data/" + host + "/rootfs/busybox/bin/busybox";
    EXPECT_EQ(0, ::access(sh.c_str(), X_OK)) << sh << "\n" << rootfs.out << rootfs.err;
  }

  auto stop = pgfleet::testing::Run({demo, "--stop"}, env, 120s);
  EXPECT_EQ(0, stop.exit_code) << stop.out << stop.err;
  EXPECT_NE(std::string::npos, stop.out.find("stopping the jobs")) << stop.out;
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(pid); }, 5s)) << "job " << pid << " runs on";
  EXPECT_EQ(
      "", pgfleet::testing::Run({"/usr/bin/pgrep", "-f", "shim-launcher [a-z]+ " + dev + "/data/"})
              .out);

  auto clean = pgfleet::testing::Run({demo, "--clean"}, env, 60s);
  EXPECT_EQ(0, clean.exit_code) << clean.out << clean.err;
  EXPECT_TRUE(Subdirs(tmp.path()).empty());
}

}  // namespace
}  // namespace pgfleet::testing
