// The dashboard in headless Chromium (issue 39, item 2): the test starts a
// cluster and the dashboard, submits jobs, and runs tests/browser/
// dashboard_test.js (playwright-core driving Debian's /usr/bin/chromium),
// which checks that the page lists them, that a job's state changes on the
// page when it finishes (no reload), that a job whose command is
// echo <script>alert(1)</script> shows it as text with no dialog, and saves
// screenshots under $PGFLEET_TEST_TMP (else the build's tests directory)/
// ui-screenshots/, printing their paths. It skips, saying why, only when
// chromium, node or playwright-core is not installed (scripts/install-deps
// installs them).

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "core/util/text.h"
#include "test_support.h"
#include "ui_fixture.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class UiBrowserTest : public OneHostClusterTest {};

std::string ScreenshotDir(const std::string& test) {
  const char* tmp = std::getenv("PGFLEET_TEST_TMP");
  std::string base = tmp && *tmp ? tmp : BinaryPath("tests");
  return base + "/ui-screenshots/" + test;
}

TEST_F(UiBrowserTest, ThePageListsJobsUpdatesLiveAndShowsMarkupAsText) {
  const std::string browser_dir = SourcePath("tests/browser");
  if (access("/usr/bin/chromium", X_OK) != 0)
    GTEST_SKIP() << "/usr/bin/chromium is not installed (scripts/install-deps installs it)";
  std::string node = access("/usr/bin/node", X_OK) == 0 ? "/usr/bin/node" : "/usr/local/bin/node";
  if (access(node.c_str(), X_OK) != 0) GTEST_SKIP() << "node is not installed";
  if (access((browser_dir + "/node_modules/playwright-core/package.json").c_str(), R_OK) != 0)
    GTEST_SKIP() << browser_dir << "/node_modules has no playwright-core "
                 << "(scripts/install-deps runs npm ci there)";

  // A job that runs until the browser test lets it end.
  const std::string go = cluster_->dir() + "/go";
  auto live = cluster_->Cli({"run", "--formation", "live", "--", "sh", "-c",
                             "while [ ! -f " + go + " ]; do sleep 0.1; done; echo finished"});
  ASSERT_EQ(0, live.exit_code) << live.err;
  std::string live_id = util::Trim(live.out);
  auto xss = cluster_->Cli({"run", "--wait", "--formation", "xss", "--", "echo",
                            "<script>alert(1)</script>", "<img src=x onerror=alert(2)>"});
  ASSERT_EQ(0, xss.exit_code) << xss.err;
  std::string xss_id = db_.Scalar("select max(id) from pgfleet.jobs");
  auto done = cluster_->Cli({"run", "--wait", "--", "true"});
  ASSERT_EQ(0, done.exit_code) << done.err;
  std::string done_id = db_.Scalar("select max(id) from pgfleet.jobs");
  ASSERT_TRUE(WaitFor([&] { return db_.Scalar("select state from pgfleet.jobs where id = " +
                                              live_id) == "running"; },
                      20s))
      << cluster_->Logs();

  UiProcess ui(db_.dsn(), cluster_->dir() + "/ui.log");
  ASSERT_GT(ui.port(), 0) << ui.process().Log();
  const std::string shots = ScreenshotDir(db_.name());
  auto r = pgfleet::testing::Run({node, browser_dir + "/dashboard_test.js"},
               {"PGFLEET_UI_URL=" + ui.url(), "PGFLEET_UI_JOBS=" + live_id + "," + xss_id + "," + done_id,
                "PGFLEET_UI_LIVE_JOB=" + live_id, "PGFLEET_UI_GO_FILE=" + go,
                "PGFLEET_UI_XSS_JOB=" + xss_id, "PGFLEET_UI_SHOTS=" + shots},
               std::chrono::seconds(static_cast<int>(180 * TestSlowdown())));
  std::cout << r.out << r.err;
  EXPECT_EQ(0, r.exit_code) << r.out << r.err << ui.process().Log();
  EXPECT_NE(std::string::npos, r.out.find("screenshot: " + shots + "/jobs-finished.png")) << r.out;
  EXPECT_EQ("succeeded", db_.Scalar("select state from pgfleet.jobs where id = " + live_id));
}

}  // namespace
}  // namespace pgfleet::testing
