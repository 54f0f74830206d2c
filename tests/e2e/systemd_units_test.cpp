// packaging/systemd (issue 39 item 3): the units systemd-analyze accepts
// without a warning, pointed at this build's binaries; hostd's unit keeps
// shims alive across its restart (KillMode=process); both restart; and the
// example config files beside them hold only options their daemon takes
// (each daemon reads its example with --config and exits 0 on --help, which
// it does only after every line parsed).

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string UnitPath(const std::string& program) {
  return SourcePath("packaging/systemd/" + program + ".service");
}

TEST(SystemdUnits, EachUnitRunsItsDaemonWithItsConfigAndRestarts) {
  for (const std::string program : {"pgfleet-schedulerd", "pgfleet-hostd"}) {
    SCOPED_TRACE(program);
    const std::string unit = ReadText(UnitPath(program));
    ASSERT_FALSE(unit.empty());
    EXPECT_NE(unit.find("ExecStart=/usr/local/bin/" + program + " --config /etc/pgfleet/" +
                        program + ".conf\n"),
              std::string::npos)
        << unit;
    EXPECT_NE(unit.find("\nRestart=always\n"), std::string::npos) << unit;
  }
  const std::string hostd = ReadText(UnitPath("pgfleet-hostd"));
  EXPECT_NE(hostd.find("\nKillMode=process\n"), std::string::npos) << hostd;
  EXPECT_NE(hostd.find("\nDelegate=yes\n"), std::string::npos) << hostd;
}

TEST(SystemdUnits, SystemdAnalyzeVerifiesThemWithoutAWarning) {
  if (pgfleet::testing::Run({"/bin/sh", "-c", "command -v systemd-analyze"}).exit_code != 0) {
    GTEST_SKIP() << "systemd-analyze is not installed";
  }
  TempDir dir;
  for (const std::string program : {"pgfleet-schedulerd", "pgfleet-hostd"}) {
    SCOPED_TRACE(program);
    const std::string unit = std::regex_replace(
        ReadText(UnitPath(program)), std::regex("/usr/local/bin/" + program), BinaryPath(program));
    const std::string path = dir.path() + "/" + program + ".service";
    std::ofstream(path) << unit;
    auto r = pgfleet::testing::Run({"/usr/bin/env", "systemd-analyze", "verify", path}, {}, 60s);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.err, "") << r.err;
  }
}

TEST(SystemdUnits, TheExampleConfigsHoldOnlyOptionsTheirDaemonTakes) {
  for (const std::string program : {"pgfleet-schedulerd", "pgfleet-hostd"}) {
    SCOPED_TRACE(program);
    auto r = pgfleet::testing::Run(
        {BinaryPath(program), "--config",
         SourcePath("packaging/systemd/" + program + ".conf.example"), "--help"},
        {}, 30s);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
}

}  // namespace
}  // namespace pgfleet::testing
