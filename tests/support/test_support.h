#pragma once
// Shared test fixtures: a fresh migrated database per test on the throwaway
// PostgreSQL that scripts/test starts ($PGFLEET_TEST_DSN), real daemon
// processes, and command runs. No mocks of PostgreSQL anywhere.

#include <gtest/gtest.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

namespace pgfleet::testing {

// $PGFLEET_TEST_DSN; fails the test (ADD_FAILURE + throw) when unset, because
// a database test that silently skips proves nothing.
std::string AdminDsn();

// A new database, migrated, dropped again at destruction.
class TestDatabase {
 public:
  explicit TestDatabase(bool migrate = true);
  // On another server (e.g. a PrivatePostgres) given its admin DSN.
  TestDatabase(const std::string& admin_dsn, bool migrate);
  ~TestDatabase();
  const std::string& dsn() const { return dsn_; }
  const std::string& name() const { return name_; }
  std::unique_ptr<pqxx::connection> Connect() const;
  // Runs SQL in one transaction; returns the first column of its first row as
  // text ("" for null or no row).
  std::string Scalar(const std::string& sql) const;
  long long Count(const std::string& sql) const { return std::stoll(Scalar(sql)); }
  // (job, attempt) pairs with more than one `kind` event ('running', 'assigned'):
  // an attempt started or placed twice. Always 0 unless something is wrong.
  long long AttemptsWithRepeated(const std::string& kind) const;
  // A login (role with LOGIN) named <base>_<database name>, member of the
  // given group roles; dropped with the database. Roles are cluster-wide, so
  // the suffix keeps parallel tests apart.
  std::string CreateLogin(const std::string& base, const std::vector<std::string>& groups) const;
  // This database's DSN, connecting as `login`.
  std::string DsnAs(const std::string& login) const { return dsn_ + " user=" + login; }

 private:
  void Create(bool migrate);
  mutable std::vector<std::string> logins_;  // dropped with the database
  std::string admin_;
  std::string name_;
  std::string dsn_;
};

// Host tickets as a scheduler signs them (core/net/ticket.h), with the
// host's key read from pgfleet.host_keys (tests connect as an admin).
std::string HostTicketKey(const TestDatabase& db, const std::string& host);
// A POST /v1/jobs body with every item that names a job and an attempt given
// a dispatch ticket for `host` (privileged as the item's spec says). A body
// that is not such JSON is returned as it is.
std::string SignDispatch(const TestDatabase& db, const std::string& host, const std::string& body);
// A stop ticket (the X-Pgfleet-Ticket header of POST /v1/jobs/ID/stop).
std::string StopTicket(const TestDatabase& db, const std::string& host, int64_t job, int attempt);

// A fresh temporary directory, removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string BinaryPath(const std::string& name);  // build/<name>
std::string SourcePath(const std::string& rel);   // source tree

// A child process with stdout+stderr in log_path; killed at destruction.
class Process {
 public:
  Process(std::vector<std::string> argv, std::string log_path,
          std::vector<std::string> extra_env = {});
  ~Process();
  pid_t pid() const { return pid_; }
  void Signal(int sig);
  // Sends SIGTERM, waits up to timeout, then SIGKILL; returns the wait status.
  int Stop(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  void Kill9();
  bool Running();
  std::string Log() const;

 private:
  std::vector<std::string> argv_;
  std::string log_path_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs argv to completion (stdin /dev/null), capturing stdout and stderr.
CommandResult Run(const std::vector<std::string>& argv, std::vector<std::string> extra_env = {},
                  std::chrono::seconds timeout = std::chrono::seconds(120));

// Names of the subdirectories of dir (none if it cannot be read).
std::vector<std::string> Subdirs(const std::string& dir);

// The ids process pid holds as the host sees them: the Uid, Gid (4 each)
// and Groups values of its /proc/<pid>/status; none once it is gone.
std::vector<long long> HostIdsOfProcess(pid_t pid);

// The per-host cgroup directories pgfleet/<scope>/<host> of `host` that exist
// now, whatever hostd's scope (hostd/drivers/container/container.h), in every
// controller the container driver uses.
std::vector<std::string> HostCgroupDirs(const std::string& host);

// True when the process is gone, or a zombie nobody has reaped yet: either
// way it runs no code any more.
bool ProcessGone(const std::string& pid);

// Polls pred every 50 ms until it holds or timeout passes; returns pred's last value.
// How much slower than a plain build the daemons and tests run here:
// PGFLEET_TEST_SLOWDOWN (scripts/test sets 4 for a sanitizer build), else 1.
double TestSlowdown();
// A time limit of the plain build, stretched by TestSlowdown().
std::chrono::milliseconds Slowed(std::chrono::milliseconds limit);
// Polls pred every 50 ms until it holds or Slowed(timeout) has passed.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

// Samples every 100 ms, on its own thread, how many hosts have allocations
// over their capacity or below zero, until Stop().
class OvercommitSampler {
 public:
  explicit OvercommitSampler(const TestDatabase& db);
  ~OvercommitSampler() { Stop(); }
  void Stop();
  long long samples() const { return samples_; }
  long long overcommitted() const { return overcommitted_; }  // host-samples over

 private:
  std::atomic<bool> done_{false};
  std::atomic<long long> samples_{0}, overcommitted_{0};
  std::thread thread_;
};

// A PostgreSQL server of the test's own (initdb into a temp dir, run as the
// postgres OS user when root, loopback, free port), for tests that restart or
// stop the database without disturbing tests running beside them.
class PrivatePostgres {
 public:
  // extra_listen: another address to listen on besides 127.0.0.1 (e.g. the
  // root side of a veth pair into a test's network namespace).
  explicit PrivatePostgres(const std::string& extra_listen = "");
  // A streaming standby of `primary` (pg_basebackup -R), started, on its own port.
  struct StandbyOf {
    const PrivatePostgres& primary;
  };
  explicit PrivatePostgres(StandbyOf standby);
  int port() const { return port_; }
  ~PrivatePostgres();
  const std::string& admin_dsn() const { return admin_dsn_; }
  void Stop();  // fast shutdown
  void Start();
  void Restart();  // fast restart: every connection is cut
  void Crash();    // immediate shutdown, as if the machine died
  void Promote();  // a standby becomes a primary
  // On a primary: makes replication synchronous (synchronous_standby_names =
  // '*': a commit returns once the standby has it, so promoting it loses no
  // assignment and no report) and waits until a standby is in sync. False
  // when none is within 30 s.
  bool MakeReplicationSynchronous();
  // A DSN for `dbname` naming this primary and `standby` with
  // target_session_attrs=read-write, as every daemon gets it for a failover.
  std::string FailoverDsn(const PrivatePostgres& standby, const std::string& dbname) const;

 private:
  void Prepare();
  void PgCtl(const std::string& action, const std::string& mode = "fast");
  TempDir dir_;
  std::string bindir_;
  int port_ = 0;
  std::string extra_listen_;
  std::string admin_dsn_;
};

// A transaction-mode pooler (pgbouncer, pool_mode = transaction, trust, on a
// free loopback port) in front of the server of `db`, at most pool_size server
// connections per database and login; postgres and `logins` may connect.
// Configured as docs/operations.md tells operators ("A large fleet":
// server_login_retry well under the host TTL), or with pgbouncer's own
// defaults for those settings. Throws when pgbouncer is missing
// (scripts/install-deps installs it).
class PgBouncer {
 public:
  enum class Settings { kAsDocumented, kPgbouncerDefaults };
  PgBouncer(const TestDatabase& db, int pool_size, const std::vector<std::string>& logins = {},
            Settings settings = Settings::kAsDocumented);
  // `db` through the pooler, as `login`.
  std::string Dsn(const TestDatabase& db, const std::string& login = "postgres") const;
  struct Pool {
    int clients = 0;  // client connections (active or waiting)
    int servers = 0;  // server connections, in any state
  };
  // The pool of database `dbname` and `login` (SHOW POOLS on the admin console).
  Pool PoolOf(const std::string& dbname, const std::string& login) const;
  std::string Log() const;

 private:
  TempDir dir_;
  int port_ = 0;
  std::unique_ptr<Process> process_;
};

// A small local cluster of real processes against a TestDatabase: schedulers
// and hosts (process driver unless told otherwise), sharing one token file.
// Hosts heartbeat every 0.5 s and reconcile every 1 s; `extra` may override
// --db, --driver, --reconcile-interval, --gc-disk-percent and
// --disk-full-percent (both 100 unless given: tests must not depend on how
// full this machine's disk is).
class Cluster {
 public:
  explicit Cluster(const TestDatabase& db);
  ~Cluster();
  Process& StartScheduler(const std::string& id, std::vector<std::string> extra = {});
  // `wrapper`, when given, is a command that runs hostd's argv after its own
  // (e.g. a namespace set up first) and must exec it, keeping its pid.
  Process& StartHost(const std::string& id, int cpu, int memory,
                     std::vector<std::string> extra = {}, std::vector<std::string> wrapper = {});
  // n hollow hosts <prefix>1..<prefix>n in one hostd process (--simulate),
  // logged in as a host login of their own bound to each of their ids (so a
  // test can cut their database access alone), heartbeating every 0.5 s with
  // a 3 s host TTL; `extra` adds flags (--cpu, --label, ...). *login, when
  // given, receives the login.
  Process& StartHollowHosts(const std::string& prefix, int n, std::vector<std::string> extra = {},
                            std::string* login = nullptr);
  const std::string& token_file() const { return token_file_; }
  const std::string& dir() const { return dir_.path(); }
  // Blocks until n hosts have a fresh heartbeat.
  bool WaitHostsUp(int n, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Runs the pgfleet CLI against the test database.
  CommandResult Cli(std::vector<std::string> args,
                    std::chrono::seconds timeout = std::chrono::seconds(120));
  // The same, connected with another DSN (e.g. a submitter's login).
  CommandResult CliAs(const std::string& dsn, std::vector<std::string> args,
                      std::chrono::seconds timeout = std::chrono::seconds(120));
  // The same without the cluster token: logs are read with tickets only.
  CommandResult CliNoToken(const std::string& dsn, std::vector<std::string> args,
                           std::chrono::seconds timeout = std::chrono::seconds(120));
  std::vector<std::unique_ptr<Process>>& processes() { return procs_; }
  // Prints every daemon's log (for failures).
  std::string Logs() const;

 private:
  const TestDatabase& db_;
  TempDir dir_;
  std::string token_file_;
  std::vector<std::unique_ptr<Process>> procs_;
};

// A test with its own database and a cluster of one scheduler (s1) and one
// host (h1: 4000 millicores, 4000 MiB, process driver), both up before the
// test body runs; the daemons' logs are printed when the test failed.
class OneHostClusterTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
};

}  // namespace pgfleet::testing
