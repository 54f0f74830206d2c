// Looking inside a job (host disk and insight issue, item 5), process
// driver: `pgfleet fs` lists and prints its sandbox (its attempt directory,
// its working directory) and cannot leave it by ".." or a symlink;
// `pgfleet exec` runs a command there as the job's user, with stdin, output
// and exit code; both only for the job's owner and operators (tickets), or
// holders of the cluster token.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/net/http.h"
#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// `pgfleet exec` attached to descriptors the test holds: its stdin (a pipe,
// or a terminal) and its output, read as it comes.
class AttachedCli {
 public:
  // in/out: the CLI's stdin and stdout+stderr; `tty`: they are the other
  // side of a terminal, which becomes the CLI's controlling one.
  AttachedCli(const std::vector<std::string>& args, const std::vector<std::string>& env, int in,
              int out, bool tty) {
    pid_ = fork();
    if (pid_ == 0) {
      if (tty) {
        setsid();
        ioctl(in, TIOCSCTTY, 0);
      }
      dup2(in, 0);
      dup2(out, 1);
      dup2(out, 2);
      for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~AttachedCli() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Reads fd into `seen` until it holds `what` (true) or the time is up.
  static bool ReadUntil(int fd, std::string* seen, const std::string& what,
                        std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + Slowed(timeout);
    while (seen->find(what) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = read(fd, buf, sizeof buf);
      if (n > 0) seen->append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  // The CLI's exit code, once it ends (-1 if not within the time).
  int Wait(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + Slowed(timeout);
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

class InsideE2eTest : public OneHostClusterTest {
 protected:
  std::string State(const std::string& id) {
    return db_.Scalar("select state from pgfleet.jobs where id = " + id);
  }
  // A job that leaves a file, a symlink out to the host's /etc and one to
  // "/", then waits.
  std::string StartJob(const std::string& dsn) {
    auto run = cluster_->CliNoToken(
        dsn, {"run", "--", "sh", "-c",
              "echo hello > note.txt; mkdir sub; ln -s /etc/passwd pw; ln -s / top; "
              "touch ready; sleep 60"});
    EXPECT_EQ(0, run.exit_code) << run.err;
    std::string id = util::Trim(run.out);
    EXPECT_TRUE(WaitFor([&] { return State(id) == "running"; }, 30s)) << State(id);
    EXPECT_TRUE(WaitFor([&] { return cluster_->Cli({"fs", id, "/ready"}).exit_code == 0; }, 10s));
    return id;
  }
};

TEST_F(InsideE2eTest, FsListsAndPrintsTheSandboxAndNeverLeavesIt) {
  std::string id = StartJob(db_.dsn());
  auto list = cluster_->Cli({"fs", id});
  ASSERT_EQ(0, list.exit_code) << list.err;
  for (const char* name : {"note.txt", "sub", "pw", "top"}) {
    EXPECT_NE(std::string::npos, list.out.find(name)) << list.out;
  }
  // hostd's own files of the attempt are not the job's: not in its sandbox.
  for (const char* name : {"output.log", "state.jsonl", "uid"}) {
    EXPECT_EQ(std::string::npos, list.out.find(name)) << list.out;
  }
  EXPECT_NE(std::string::npos, list.out.find("symlink")) << list.out;
  auto listed = cluster_->Cli({"fs", id, "/", "--json"});
  ASSERT_EQ(0, listed.exit_code) << listed.err;
  EXPECT_EQ("dir", json::parse(listed.out)["type"]);

  auto file = cluster_->Cli({"fs", id, "/note.txt"});
  ASSERT_EQ(0, file.exit_code) << file.err;
  EXPECT_EQ("hello\n", file.out);
  // The same file by a relative path.
  EXPECT_EQ("hello\n", cluster_->Cli({"fs", id, "note.txt"}).out);

  // ".." is refused by name; a symlink is shown, not followed; a path through
  // a symlink to "/" stays in the sandbox (its /etc is the sandbox's, absent).
  auto up = cluster_->Cli({"fs", id, "/../../../etc/passwd"});
  EXPECT_EQ(1, up.exit_code);
  EXPECT_NE(std::string::npos, up.err.find("path must not contain \"..\"")) << up.err;
  auto pw = cluster_->Cli({"fs", id, "/pw"});
  ASSERT_EQ(0, pw.exit_code) << pw.err;
  EXPECT_EQ("/pw -> /etc/passwd\n", pw.out);
  EXPECT_EQ(std::string::npos, pw.out.find("root:")) << pw.out;
  auto through = cluster_->Cli({"fs", id, "/top/etc/passwd"});
  EXPECT_EQ(1, through.exit_code) << through.out;
  EXPECT_NE(std::string::npos, through.err.find("No such file")) << through.err;
  EXPECT_EQ(std::string::npos, through.out.find("root:")) << through.out;
  auto missing = cluster_->Cli({"fs", id, "/nothing"});
  EXPECT_EQ(1, missing.exit_code);
  EXPECT_NE(std::string::npos, missing.err.find("No such file")) << missing.err;

  // After the job: its attempt directory can still be read.
  ASSERT_EQ(0, cluster_->Cli({"stop", id}).exit_code);
  ASSERT_TRUE(WaitFor([&] { return State(id) == "cancelled"; }, 30s));
  EXPECT_EQ("hello\n", cluster_->Cli({"fs", id, "/note.txt"}).out);
}

TEST_F(InsideE2eTest, ExecRunsACommandInTheJobWithItsOutputAndExitCode) {
  std::string id = StartJob(db_.dsn());
  auto cat = cluster_->Cli({"exec", id, "--", "cat", "note.txt"});
  EXPECT_EQ(0, cat.exit_code) << cat.err;
  EXPECT_EQ("hello\n", cat.out);
  // Its environment is the job's.
  auto env = cluster_->Cli({"exec", id, "--", "sh", "-c", "echo $PGFLEET_JOB_ID; pwd"});
  EXPECT_EQ(0, env.exit_code) << env.err;
  EXPECT_EQ(0u, env.out.find(id + "\n")) << env.out;
  auto code = cluster_->Cli({"exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(3, code.exit_code);
  EXPECT_EQ("out\n", code.out);
  EXPECT_NE(std::string::npos, code.err.find("err\n")) << code.err;
  auto missing = cluster_->Cli({"exec", id, "--", "no-such-command-here"});
  EXPECT_EQ(127, missing.exit_code);
  EXPECT_NE(std::string::npos, missing.err.find("exec: No such file")) << missing.err;
  // stdin goes to the command (the API's body; the CLI's -i).
  httplib::Client api(db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
  api.set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
  auto res = api.Post(("/v1/jobs/" + id + "/exec?arg=tr&arg=a-z&arg=A-Z").c_str(), "shout\n",
                      "application/octet-stream");
  ASSERT_TRUE(res);
  ASSERT_EQ(200, res->status) << res->body;
  EXPECT_EQ("o 6\nSHOUT\nx 0\n", res->body);
  auto bad = api.Post(("/v1/jobs/" + id + "/exec").c_str(), "", "application/octet-stream");
  ASSERT_TRUE(bad);
  EXPECT_EQ(400, bad->status);
  EXPECT_NE(std::string::npos, bad->body.find("arg")) << bad->body;

  // A job that is not running: the database gives no exec ticket, and says why.
  ASSERT_EQ(0, cluster_->Cli({"stop", id}).exit_code);
  ASSERT_TRUE(WaitFor([&] { return State(id) == "cancelled"; }, 30s));
  auto after = cluster_->CliNoToken(db_.dsn(), {"exec", id, "--", "true"});
  EXPECT_EQ(1, after.exit_code);
  EXPECT_NE(std::string::npos, after.err.find("is not running")) << after.err;
}

TEST_F(InsideE2eTest, OnlyTheOwnerAndOperatorsGetIn) {
  // Privileged: the process driver isolates nothing, so it runs only privileged jobs.
  std::string alice = db_.CreateLogin("alice", {"pgfleet_submitter", "pgfleet_privileged"});
  std::string bob = db_.CreateLogin("bob", {"pgfleet_submitter", "pgfleet_privileged"});
  std::string op = db_.CreateLogin("op", {"pgfleet_operator"});
  std::string id = StartJob(db_.DsnAs(alice));
  for (const std::string& who : {alice, op}) {
    auto fs = cluster_->CliNoToken(db_.DsnAs(who), {"fs", id, "/note.txt"});
    EXPECT_EQ(0, fs.exit_code) << who << ": " << fs.err;
    EXPECT_EQ("hello\n", fs.out) << who;
    auto exec = cluster_->CliNoToken(db_.DsnAs(who), {"exec", id, "--", "id", "-u"});
    EXPECT_EQ(0, exec.exit_code) << who << ": " << exec.err;
  }
  auto fs = cluster_->CliNoToken(db_.DsnAs(bob), {"fs", id});
  EXPECT_EQ(1, fs.exit_code);
  EXPECT_NE(std::string::npos, fs.err.find("may not read its files")) << fs.err;
  auto exec = cluster_->CliNoToken(db_.DsnAs(bob), {"exec", id, "--", "true"});
  EXPECT_EQ(1, exec.exit_code);
  EXPECT_NE(std::string::npos, exec.err.find("may not run commands in it")) << exec.err;
  // Without a ticket or the token the host refuses; a logs ticket opens neither.
  httplib::Client anonymous(db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
  auto plain = anonymous.Get(("/v1/jobs/" + id + "/fs").c_str());
  ASSERT_TRUE(plain);
  EXPECT_EQ(401, plain->status);
  std::string logs_ticket = db_.Scalar("select ticket from pgfleet.log_ticket(" + id + ")");
  auto wrong = anonymous.Get(("/v1/jobs/" + id + "/fs").c_str(),
                             httplib::Headers{{"X-Pgfleet-Ticket", logs_ticket}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(403, wrong->status);
  EXPECT_NE(std::string::npos, wrong->body.find("is for logs, not fs")) << wrong->body;
  ASSERT_EQ(0, cluster_->Cli({"stop", id}).exit_code);
  ASSERT_TRUE(WaitFor([&] { return State(id) == "cancelled"; }, 30s));
}

TEST_F(InsideE2eTest, ExecWithIStreamsStdinWhileTheCommandRuns) {
  std::string id = StartJob(db_.dsn());
  int in[2], out[2];
  ASSERT_EQ(0, pipe2(in, O_CLOEXEC));
  ASSERT_EQ(0, pipe2(out, O_CLOEXEC));
  // Answers each line as it comes: the second line is written only once the
  // first one's answer is back, so stdin cannot have been read to its end first.
  AttachedCli cli({BinaryPath("pgfleet"), "exec", "-i", id, "--", "sh", "-c",
                   "while read l; do echo got:$l; done; echo stdin-ended; exit 4"},
                  {"PGFLEET_DB=" + db_.dsn(), "PGFLEET_TOKEN_FILE=" + cluster_->token_file()},
                  in[0], out[1], false);
  close(in[0]);
  close(out[1]);
  std::string seen;
  ASSERT_EQ(2, write(in[1], "a\n", 2));
  ASSERT_TRUE(AttachedCli::ReadUntil(out[0], &seen, "got:a\n", 20s)) << seen;
  ASSERT_EQ(2, write(in[1], "b\n", 2));
  ASSERT_TRUE(AttachedCli::ReadUntil(out[0], &seen, "got:b\n", 20s)) << seen;
  close(in[1]);  // end of stdin: the command's ends too
  EXPECT_TRUE(AttachedCli::ReadUntil(out[0], &seen, "stdin-ended\n", 20s)) << seen;
  EXPECT_EQ(4, cli.Wait(20s));
  EXPECT_EQ("got:a\ngot:b\nstdin-ended\n", seen);
  close(out[0]);

  // A session's stdin is reached only with its name.
  httplib::Client api(db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
  auto forged = api.Post(("/v1/jobs/" + id + "/exec/stdin").c_str(),
                         {{"X-Pgfleet-Exec-Session", "1.00000000000000000000000000000000"}}, "x",
                         "application/octet-stream");
  ASSERT_TRUE(forged);
  EXPECT_EQ(404, forged->status) << forged->body;
  auto none = api.Post(("/v1/jobs/" + id + "/exec/stdin").c_str(), "x", "application/octet-stream");
  ASSERT_TRUE(none);
  EXPECT_EQ(401, none->status) << none->body;
}

TEST_F(InsideE2eTest, ExecWithItGivesTheCommandATerminalOfOurSizeThatFollowsResizes) {
  std::string id = StartJob(db_.dsn());
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0);
  ASSERT_EQ(0, grantpt(master));
  ASSERT_EQ(0, unlockpt(master));
  int other = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(other, 0);
  winsize size{33, 101, 0, 0};
  ASSERT_EQ(0, ioctl(master, TIOCSWINSZ, &size));
  // Prints whether it has a terminal and its size, then the size again for
  // each line it reads, until "quit".
  AttachedCli cli({BinaryPath("pgfleet"), "exec", "-it", id, "--", "sh", "-c",
                   "test -t 0 && test -t 1 && echo on-a-tty; stty size; "
                   "while read l; do test \"$l\" = quit && exit 5; stty size; done"},
                  {"PGFLEET_DB=" + db_.dsn(), "PGFLEET_TOKEN_FILE=" + cluster_->token_file()},
                  other, other, true);
  close(other);
  std::string seen;
  ASSERT_TRUE(AttachedCli::ReadUntil(master, &seen, "33 101", 20s)) << seen;
  EXPECT_NE(std::string::npos, seen.find("on-a-tty")) << seen;
  // Our terminal grows: the CLI hears SIGWINCH and resizes the command's.
  size = {40, 120, 0, 0};
  ASSERT_EQ(0, ioctl(master, TIOCSWINSZ, &size));
  EXPECT_TRUE(WaitFor(
      [&] {
        EXPECT_EQ(1, write(master, "\r", 1));
        return AttachedCli::ReadUntil(master, &seen, "40 120", 500ms);
      },
      20s))
      << seen;
  // What we type is echoed by the command's terminal (ours is raw).
  ASSERT_EQ(5, write(master, "quit\r", 5));
  EXPECT_TRUE(AttachedCli::ReadUntil(master, &seen, "quit", 20s)) << seen;
  EXPECT_EQ(5, cli.Wait(20s)) << seen;
  close(master);
}

}  // namespace
}  // namespace pgfleet::testing
