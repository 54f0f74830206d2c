// Host isolation against an ordinary submitter (issue 33), with the real
// daemons and the container driver: a job's links never make hostd or its
// shim touch a host file, no other local account reaches into an attempt,
// `pgfleet fs` reads only what the job itself could, and a used ticket stays
// used across a hostd restart. Needs root and cgroups, like every container
// test (CI has both): without them the tests fail with the reason.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fstream>
#include <sstream>
#include <memory>
#include <string>
#include <thread>

#include "core/util/text.h"
#include "hostd/drivers/container/container.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A file of the host's that only root may read, and one anyone may read,
// each removed at the end.
class HostFile {
 public:
  HostFile(const std::string& name, const std::string& content, mode_t mode)
      : path_("/var/lib/pgfleet-test-" + name + "-" + std::to_string(getpid())) {
    std::ofstream(path_) << content;
    chmod(path_.c_str(), mode);
  }
  ~HostFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class HostIsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "the host isolation tests must run as root (CI does)";
    std::string why;
    ASSERT_TRUE(hostd::ContainerDriverAvailable(&why)) << "no container driver here: " << why;
    cluster_ = std::make_unique<Cluster>(db_);
    cluster_->StartScheduler("s1");
    cluster_->StartHost(host_, 4000, 4000, {"--driver", "container"});
    ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
    submitter_ = db_.DsnAs(db_.CreateLogin("alice", {"pgfleet_submitter"}));
  }
  void TearDown() override {
    if (HasFailure()) std::cout << cluster_->Logs();
  }

  // Submits as the ordinary submitter (no privileged feature), on the
  // host's own tree (no rootfs); returns the job id.
  std::string Submit(const std::string& script, const std::string& columns = "",
                     const std::string& values = "") {
    pqxx::connection c(submitter_);
    pqxx::work tx(c);
    auto r = tx.exec1("insert into pgfleet.jobs (command" + columns + ") values (array['sh', '-c', " +
                      tx.quote(script) + "]" + values + ") returning id");
    tx.commit();
    return r[0].as<std::string>();
  }
  std::string Job(const std::string& id, const std::string& column) {
    return db_.Scalar("select " + column + " from pgfleet.jobs where id = " + id);
  }
  std::string AttemptDir(const std::string& id) {
    return cluster_->dir() + "/" + host_ + "/jobs/" + id + "-1";
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  std::string host_ = "iso" + std::to_string(getpid());
  std::string submitter_;
};

TEST_F(HostIsolationTest, LinksAtTheNamesHostdUsesTouchNoHostFileAndLeakNothing) {
  HostFile secret("secret", "TOPSECRET\n", 0600);
  HostFile target("target", "ORIGINAL\n", 0644);
  // Every name of the attempt's bookkeeping, planted where the job can write,
  // then output past a rotation (log_max_file_mb 1).
  std::string plant;
  for (const char* name : {"output.log", "output.log.0", "output.log.1048576", "state.jsonl",
                           "state.reported.jsonl", "uid", ".etc", "last-heartbeat"}) {
    plant += "ln -s " + target.path() + " " + name + "; ln -s " + secret.path() + " ../" + name +
             " 2>/dev/null; ";
  }
  std::string id = Submit(plant + "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo done",
                          ", log_max_file_mb", ", 1");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "succeeded"; }, 60s))
      << Job(id, "state") << " " << Job(id, "error");
  EXPECT_EQ(ReadAll(target.path()), "ORIGINAL\n");
  EXPECT_EQ(ReadAll(secret.path()), "TOPSECRET\n");
  std::string tail = Job(id, "output_tail");
  EXPECT_NE(tail.find("done"), std::string::npos) << tail.substr(0, 200);
  EXPECT_EQ(tail.find("ORIGINAL"), std::string::npos);
  EXPECT_EQ(tail.find("TOPSECRET"), std::string::npos);
  auto logs = cluster_->Cli({"logs", id});
  EXPECT_EQ(0, logs.exit_code) << logs.err;
  EXPECT_EQ(logs.out.find("ORIGINAL"), std::string::npos);
  EXPECT_EQ(logs.out.find("TOPSECRET"), std::string::npos);
  EXPECT_NE(logs.out.find("done"), std::string::npos);

  // The attempt is root's alone: another local account cannot write into it,
  // nor reach the job's own work dir through it (owned by the job's user).
  struct stat st {};
  ASSERT_EQ(stat(AttemptDir(id).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  for (const std::string& where : {AttemptDir(id), AttemptDir(id) + "/work"}) {
    auto r = pgfleet::testing::Run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                  "/usr/bin/touch", where + "/planted"});
    EXPECT_NE(r.exit_code, 0) << "nobody wrote into " << where;
  }
}

TEST_F(HostIsolationTest, FsReadsOnlyWhatTheJobCouldReadItself) {
  HostFile secret("secret", "TOPSECRET\n", 0600);
  std::string id = Submit("echo mine > /tmp/mine; echo work > w.txt; touch /tmp/ready; sleep 60");
  ASSERT_TRUE(WaitFor([&] { return cluster_->Cli({"fs", id, "/tmp/ready"}).exit_code == 0; }, 30s))
      << Job(id, "state") << " " << Job(id, "error");
  for (const std::string& path : {std::string("/etc/shadow"), secret.path()}) {
    auto r = cluster_->Cli({"fs", id, path});
    EXPECT_EQ(r.exit_code, 1) << path << ": " << r.out;
    EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << path << ": " << r.err;
    EXPECT_EQ(r.out.find("TOPSECRET"), std::string::npos);
    EXPECT_EQ(r.out.find("root:"), std::string::npos);
  }
  EXPECT_EQ(cluster_->Cli({"fs", id, "/tmp/mine"}).out, "mine\n");
  auto tmp = cluster_->Cli({"fs", id, "/tmp"});
  EXPECT_NE(tmp.out.find("mine"), std::string::npos) << tmp.out << tmp.err;
  // A world-readable host file the job sees is shown: it is a read, not a refusal.
  EXPECT_EQ(cluster_->Cli({"fs", id, "/etc/hostname"}).exit_code, 0);

  // Ended: its work dir, read as its owner (the job's user).
  ASSERT_EQ(0, cluster_->Cli({"stop", id}).exit_code);
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "cancelled"; }, 30s));
  EXPECT_EQ(cluster_->Cli({"fs", id, "/w.txt"}).out, "work\n");
}

// The host ids of every process whose command line is exactly argv.
std::vector<long long> HostIdsOfProcesses(const std::string& cmdline) {
  std::vector<long long> ids;
  for (const auto& pid : Subdirs("/proc")) {
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (ReadAll("/proc/" + pid + "/cmdline") != cmdline) continue;
    for (long long id : HostIdsOfProcess(std::stoi(pid))) ids.push_back(id);
  }
  return ids;
}

// run_as naming a host account (daemon, uid 1): the job is uid 1 in its own
// user namespace, which is host uid <start> + 1 of hostd's --job-ids range,
// so the account's 0600 file is not its to read; commands `pgfleet exec`
// runs in it are the same user and hold the same host ids.
TEST_F(HostIsolationTest, ARunAsNamingAHostAccountHoldsOnlyIdsOfTheRange) {
  HostFile secret("daemons", "DAEMONSECRET\n", 0600);
  ASSERT_EQ(chown(secret.path().c_str(), 1, 1), 0);
  const std::string marker = "987.654";  // this job's sleep, found among the host's processes
  std::string id = Submit("cat " + secret.path() + " 2>&1; cat /proc/self/uid_map; id -u; " +
                              "touch /tmp/ready; exec sleep " + marker,
                          ", run_as", ", 'daemon'");
  ASSERT_TRUE(WaitFor([&] { return cluster_->Cli({"fs", id, "/tmp/ready"}).exit_code == 0; }, 30s))
      << Job(id, "state") << " " << Job(id, "error");
  auto exec = cluster_->Cli({"exec", id, "--", "sh", "-c", "id -u; exec sleep 0.5" + marker.substr(4)});
  EXPECT_EQ(exec.exit_code, 0) << exec.err;
  EXPECT_EQ(exec.out, "1\n");
  std::vector<long long> ids = HostIdsOfProcesses(std::string("sleep\0", 6) + marker + '\0');
  const hostd::JobIdRange range;  // hostd's default --job-ids
  ASSERT_GE(ids.size(), 9u) << "Uid and Gid (4 each) and the groups of the job's sleep";
  for (long long v : ids) {
    EXPECT_GE(v, static_cast<long long>(range.start));
    EXPECT_LT(v, static_cast<long long>(range.start) + range.count);
  }
  ASSERT_EQ(0, cluster_->Cli({"stop", id}).exit_code);
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "cancelled"; }, 30s));
  std::string out = Job(id, "output_tail");
  EXPECT_EQ(out.find("DAEMONSECRET"), std::string::npos) << out;
  EXPECT_NE(out.find("Permission denied"), std::string::npos) << out;
  EXPECT_NE(out.find(" " + std::to_string(range.start) + " "), std::string::npos) << out;  // uid_map
  EXPECT_NE(out.find("\n1\n"), std::string::npos) << out;
}

// A job's disk through the daemons: writing past it fails the job with
// "disk full", the image is gone when the job ends; the CLI takes --disk and
// refuses a bad one naming the rule.
TEST_F(HostIsolationTest, AJobWritingPastItsDiskFailsSayingSo) {
  std::string id = Submit("head -c 20000000 /dev/zero > big; echo rc=$?; exit 3", ", disk", ", 8");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "failed"; }, 30s))
      << Job(id, "state") << " " << Job(id, "error");
  EXPECT_EQ(Job(id, "error"), "disk full (limit 8 MiB)");
  EXPECT_NE(Job(id, "output_tail").find("No space left on device"), std::string::npos)
      << Job(id, "output_tail");
  struct stat st {};
  EXPECT_NE(stat((AttemptDir(id) + "/disk.img").c_str(), &st), 0);

  auto bad = cluster_->Cli({"run", "--disk", "-5", "--", "true"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("disk must be between 0 and 16777216"), std::string::npos) << bad.err;
  auto fits = cluster_->Cli(
      {"run", "--wait", "--disk", "4", "--", "sh", "-c",
       "df -k . | tail -1 | awk '{print ($2 > 2000 && $2 <= 4096)}'"});
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(fits.out, "1\n");
}

// A Unix socket of the host's (mode 0777, in /run, where PostgreSQL's, the
// container runtime's and the system bus's live) is out of reach of a job with
// network none: a read-only mount does not stop connect(), so those
// directories are not shown to it at all. So are home directories.
TEST_F(HostIsolationTest, AJobOnTheHostsTreeReachesNoHostSocketAndNoHomeDirectory) {
  const std::string dir = "/run/pgfleet-test-" + std::to_string(getpid());
  mkdir(dir.c_str(), 0755);
  const std::string sock = dir + "/open.sock";
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << strerror(errno);
  ASSERT_EQ(listen(fd, 4), 0);
  chmod(sock.c_str(), 0777);
  struct Cleanup {
    int fd;
    std::string sock, dir;
    ~Cleanup() {
      close(fd);
      unlink(sock.c_str());
      rmdir(dir.c_str());
    }
  } cleanup{fd, sock, dir};
  HostFile home("home", "x", 0644);  // (in /var/lib: seen, world-readable, a control)

  std::string id = Submit("for p in " + sock + " " + dir + " /run/postgresql /var/run/postgresql; " +
                          "do test -e \"$p\" && echo SEES $p; done; " +
                          "for d in /run /root /home /var/tmp; do " +
                          "test -n \"$(ls -A $d)\" && echo SEES inside $d; done; " +
                          "test -e " + home.path() + " && echo CONTROL; echo end");
  ASSERT_TRUE(WaitFor([&] { return Job(id, "state") == "succeeded"; }, 30s))
      << Job(id, "state") << " " << Job(id, "error");
  std::string out = Job(id, "output_tail");
  EXPECT_EQ(out.find("SEES"), std::string::npos) << out;
  EXPECT_NE(out.find("CONTROL\nend"), std::string::npos) << out;
  // Nothing ever connected to it.
  EXPECT_LT(accept(fd, nullptr, nullptr), 0);
}

// Two clusters (two databases) on one machine, each with a host of the same
// id: A runs its job 1, B its jobs 1 and 2 (ids and attempts the same as
// A's). Starting, SIGKILLing and stopping A's hostd, and A's job ending,
// leave B's jobs running: each hostd's cgroups are named under its own scope
// (before, A's restart took B's job 2 for a leftover of its own and killed
// it, and both jobs 1 shared one cgroup).
TEST(TwoClustersTest, HostsOfOneIdInTwoClustersNeverTouchEachOthersJobs) {
  ASSERT_EQ(geteuid(), 0u) << "needs root (CI has it)";
  std::string why;
  ASSERT_TRUE(hostd::ContainerDriverAvailable(&why)) << why;
  TestDatabase db_a, db_b;
  Cluster a(db_a), b(db_b);
  const std::string host = "twin" + std::to_string(getpid());
  a.StartScheduler("s1");
  b.StartScheduler("s1");
  a.StartHost(host, 4000, 4000, {"--driver", "container"});
  b.StartHost(host, 4000, 4000, {"--driver", "container"});
  ASSERT_TRUE(a.WaitHostsUp(1) && b.WaitHostsUp(1)) << a.Logs() << b.Logs();
  db_a.Scalar("insert into pgfleet.jobs (command) values ('{sleep,600}')");
  db_b.Scalar("insert into pgfleet.jobs (command) select '{sleep,600}' from generate_series(1, 2)");
  auto pid_of = [](const TestDatabase& db, int job) {
    return db.Scalar("select pid from pgfleet.jobs where id = " + std::to_string(job) +
                     " and state = 'running'");
  };
  ASSERT_TRUE(WaitFor(
      [&] { return !pid_of(db_a, 1).empty() && !pid_of(db_b, 1).empty() && !pid_of(db_b, 2).empty(); },
      30s))
      << a.Logs() << b.Logs();
  const std::string a1 = pid_of(db_a, 1), b1 = pid_of(db_b, 1), b2 = pid_of(db_b, 2);
  auto b_alive = [&] { return !ProcessGone(b1) && !ProcessGone(b2); };
  // Sampled for 2 s: B's jobs stay up.
  auto b_stays_alive = [&] {
    bool alive = true;
    for (int i = 0; i < 20 && alive; ++i) {
      alive = b_alive();
      std::this_thread::sleep_for(100ms);
    }
    return alive;
  };

  // A's hostd killed and started again: it re-attaches its own job and
  // removes the cgroups it finds without a shim of its own.
  a.processes()[1]->Kill9();
  const long long generation = db_a.Count("select generation from pgfleet.hosts");
  a.StartHost(host, 4000, 4000, {"--driver", "container"});
  ASSERT_TRUE(WaitFor([&] { return db_a.Count("select generation from pgfleet.hosts") > generation; },
                      20s))
      << a.Logs();
  EXPECT_TRUE(b_stays_alive()) << "a job of B died when A's hostd restarted";
  EXPECT_FALSE(ProcessGone(a1)) << "A's own job did not survive its hostd's restart";

  // A's job ends: its cgroup goes, B's job 1 stays.
  db_a.Scalar("select pgfleet.cancel(1)");
  ASSERT_TRUE(WaitFor([&] { return db_a.Scalar("select state from pgfleet.jobs where id = 1") == "cancelled"; },
                      30s));
  EXPECT_TRUE(b_stays_alive()) << "a job of B died when A's job of the same id ended";

  // A's hostd stopped (SIGTERM: it tidies its own empty cgroups).
  a.processes().back()->Stop();
  EXPECT_TRUE(b_stays_alive()) << "a job of B died when A's hostd stopped";
  EXPECT_EQ("2", db_b.Scalar("select count(*) from pgfleet.jobs where state = 'running'"));
}

}  // namespace
}  // namespace pgfleet::testing
