// What a job or a submitter wrote (its command, its output) reaches an
// operator's terminal through inspect, ps and events with every control
// character escaped (issue 34): a job cannot retitle the operator's window or
// rewrite the screen. `pgfleet logs` keeps the job's bytes.

#include <gtest/gtest.h>

#include <string>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class CliEscapeTest : public OneHostClusterTest {};

TEST_F(CliEscapeTest, ControlCharactersAreEscapedInInspectPsAndEventsButNotInLogs) {
  // An OSC sequence (retitle the window) and a CSI one (clear the screen),
  // in the command and in the output; C1 CSI (U+009B) too.
  auto run = cluster_->Cli({"run", "--", "sh", "-c",
                            "printf '\\033]0;pwned\\007out\\033[2J\\302\\233end\\n'; exit 3"});
  ASSERT_EQ(0, run.exit_code) << run.err;
  std::string id = util::Trim(run.out);
  ASSERT_TRUE(WaitFor([&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "failed"; },
                      30s));
  ASSERT_NE(std::string::npos,
            db_.Scalar("select output_tail from pgfleet.jobs where id = " + id).find('\033'));

  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"inspect", id}, {"ps", "--all"}, {"events", id}}) {
    auto r = cluster_->Cli(args);
    EXPECT_EQ(0, r.exit_code) << r.err;
    EXPECT_EQ(std::string::npos, r.out.find('\033')) << args[0] << " printed a raw ESC";
    EXPECT_EQ(std::string::npos, r.out.find('\007')) << args[0] << " printed a raw BEL";
    EXPECT_EQ(std::string::npos, r.out.find("\302\233")) << args[0] << " printed a raw C1 CSI";
  }
  auto inspect = cluster_->Cli({"inspect", id});
  EXPECT_NE(std::string::npos, inspect.out.find("\\x1b]0;pwned\\x07out\\x1b[2J\\xc2\\x9bend\n"))
      << inspect.out;
  // The job's own bytes, for whoever asks for its output.
  auto logs = cluster_->Cli({"logs", id});
  EXPECT_NE(std::string::npos, logs.out.find("\033]0;pwned\007out\033[2J")) << logs.out;

  // On request, to a pipe (as here), the values as stored...
  auto raw = cluster_->Cli({"inspect", "--raw", id});
  EXPECT_EQ(0, raw.exit_code) << raw.err;
  EXPECT_NE(std::string::npos, raw.out.find("\033]0;pwned\007out\033[2J\302\233end\n"))
      << raw.out;
  // ...but never to a terminal (script(1) gives the CLI one).
  auto tty = pgfleet::testing::Run({"/usr/bin/script", "-qec",
                  BinaryPath("pgfleet") + " inspect --raw " + id + " --db '" + db_.dsn() + "'",
                  "/dev/null"});
  EXPECT_NE(std::string::npos, tty.out.find("--raw writes control characters as they are"))
      << tty.out << tty.err;
  EXPECT_EQ(std::string::npos, tty.out.find('\033')) << tty.out;
}

}  // namespace
}  // namespace pgfleet::testing
