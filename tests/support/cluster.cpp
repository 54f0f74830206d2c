// The servers and clusters of the tests: PrivatePostgres (a PostgreSQL of a
// test's own) and Cluster (real daemons against a TestDatabase).
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/db/migrate.h"
#include "test_support.h"

namespace pgfleet::testing {

namespace {
std::atomic<int> clusters{0};  // makes each cluster's token unique in the process
}  // namespace

static int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

static std::vector<std::string> AsOwner(std::vector<std::string> argv) {
  if (getuid() != 0) return argv;
  std::vector<std::string> out = {"/usr/sbin/runuser", "-u", "postgres", "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

void PrivatePostgres::Prepare() {
  for (const char* d : {"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin"}) {
    if (access((std::string(d) + "/initdb").c_str(), X_OK) == 0) {
      bindir_ = d;
      break;
    }
  }
  if (bindir_.empty()) throw std::runtime_error("initdb not found");
  if (getuid() == 0) {
    if (chown(dir_.path().c_str(), 0, 0) != 0 || chmod(dir_.path().c_str(), 0777) != 0) {
      throw std::runtime_error("cannot prepare " + dir_.path());
    }
  }
}

PrivatePostgres::PrivatePostgres(StandbyOf standby) {
  Prepare();
  // initdb's trust lines allow replication connections from 127.0.0.1.
  auto r = Run(AsOwner({bindir_ + "/pg_basebackup", "-h", "127.0.0.1", "-p",
                        std::to_string(standby.primary.port()), "-U", "postgres", "-D",
                        dir_.path() + "/data", "-R", "-X", "stream", "--checkpoint=fast"}),
               {}, std::chrono::seconds(120));
  if (r.exit_code != 0) throw std::runtime_error("pg_basebackup failed: " + r.err);
  port_ = FreeLoopbackPort();
  admin_dsn_ = "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=postgres";
  Start();
}

PrivatePostgres::PrivatePostgres(const std::string& extra_listen) : extra_listen_(extra_listen) {
  Prepare();
  auto r = Run(AsOwner({bindir_ + "/initdb", "-D", dir_.path() + "/data", "-U", "postgres", "-A",
                        "trust", "-E", "UTF8", "--locale=C.UTF-8"}));
  if (r.exit_code != 0) throw std::runtime_error("initdb failed: " + r.err);
  if (!extra_listen_.empty()) {
    // Clients on the test's own link (e.g. a hostd in the test's network namespace).
    std::ofstream(dir_.path() + "/data/pg_hba.conf", std::ios::app)
        << "host all all samenet trust\n";
  }
  port_ = FreeLoopbackPort();
  admin_dsn_ = "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=postgres";
  Start();
}

PrivatePostgres::~PrivatePostgres() {
  try {
    PgCtl("stop");
  } catch (const std::exception&) {
  }
}

void PrivatePostgres::PgCtl(const std::string& action, const std::string& mode) {
  std::vector<std::string> argv = {bindir_ + "/pg_ctl",
                                   "-D",
                                   dir_.path() + "/data",
                                   "-l",
                                   dir_.path() + "/server.log",
                                   "-w",
                                   "-t",
                                   "60",
                                   "-m",
                                   mode};
  if (action == "start" || action == "restart") {
    argv.push_back("-o");
    std::string listen = extra_listen_.empty() ? "127.0.0.1" : "127.0.0.1," + extra_listen_;
    argv.push_back("-c listen_addresses=" + listen + " -p " + std::to_string(port_) + " -k " +
                   dir_.path() + " -c fsync=off -c max_connections=200");
  }
  argv.push_back(action);
  auto r = Run(AsOwner(argv));
  if (r.exit_code != 0) throw std::runtime_error("pg_ctl " + action + " failed: " + r.err + r.out);
}

void PrivatePostgres::Stop() { PgCtl("stop"); }
void PrivatePostgres::Start() { PgCtl("start"); }
void PrivatePostgres::Restart() { PgCtl("restart"); }
void PrivatePostgres::Crash() { PgCtl("stop", "immediate"); }
void PrivatePostgres::Promote() { PgCtl("promote"); }

bool PrivatePostgres::MakeReplicationSynchronous() {
  pqxx::connection c(admin_dsn_);
  pqxx::nontransaction(c).exec0("alter system set synchronous_standby_names = '*'");
  pqxx::nontransaction(c).exec("select pg_reload_conf()");
  return WaitFor(
      [&] {
        return pqxx::nontransaction(c)
                   .exec1("select count(*) from pg_stat_replication where sync_state = 'sync'")[0]
                   .as<int>() == 1;
      },
      std::chrono::seconds(30));
}

std::string PrivatePostgres::FailoverDsn(const PrivatePostgres& standby,
                                         const std::string& dbname) const {
  return "host=127.0.0.1,127.0.0.1 port=" + std::to_string(port_) + "," +
         std::to_string(standby.port()) + " user=postgres dbname=" + dbname +
         " target_session_attrs=read-write";
}

Cluster::Cluster(const TestDatabase& db) : db_(db) {
  token_file_ = dir_.path() + "/token";
  std::ofstream(token_file_) << "test-token-" << getpid() << "-" << clusters++ << "\n";
}

Cluster::~Cluster() {
  // Jobs outlive hostd by design; a test must not leave its jobs behind.
  // Killed once while the daemons run, and again once they have stopped: a
  // service's scheduler replaces killed replicas, and hostd reports the pids
  // of jobs it started meanwhile before it exits.
  auto kill_jobs = [this] {
    try {
      pqxx::connection c(db_.dsn());
      pqxx::work tx(c);
      for (const auto& r :
           tx.exec("select pid from pgfleet.jobs where pid is not null and state in "
                   "('assigned', 'running')")) {
        pid_t pid = r[0].as<int>();
        if (pid > 1) {
          kill(-pid, SIGKILL);
          kill(pid, SIGKILL);
        }
      }
    } catch (const std::exception&) {
    }
  };
  kill_jobs();
  // Hosts first, then schedulers: reverse start order.
  for (auto it = procs_.rbegin(); it != procs_.rend(); ++it) (*it)->Stop(std::chrono::seconds(5));
  kill_jobs();
}

Process& Cluster::StartScheduler(const std::string& id, std::vector<std::string> extra) {
  std::vector<std::string> argv = {BinaryPath("pgfleet-schedulerd"), "--id", id, "--token-file",
                                   token_file_};
  // The test database's owner unless the test gives its own --db (a login).
  if (std::find(extra.begin(), extra.end(), "--db") == extra.end()) {
    argv.push_back("--db");
    argv.push_back(db_.dsn());
  }
  // A short safety-net tick unless the test chooses its own.
  if (std::find(extra.begin(), extra.end(), "--tick") == extra.end()) {
    argv.push_back("--tick");
    argv.push_back("0.5");
  }
  // Hosts answer more slowly in a sanitizer build (TestSlowdown).
  if (TestSlowdown() > 1 &&
      std::find(extra.begin(), extra.end(), "--dispatch-timeout") == extra.end()) {
    argv.push_back("--dispatch-timeout");
    argv.push_back(std::to_string(static_cast<int>(3 * TestSlowdown())) + "s");
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  procs_.push_back(std::make_unique<Process>(argv, dir_.path() + "/" + id + ".log"));
  return *procs_.back();
}

Process& Cluster::StartHollowHosts(const std::string& prefix, int n,
                                   std::vector<std::string> extra, std::string* login) {
  std::string name = db_.CreateLogin(
      "hosts_" + prefix.substr(0, prefix.find_first_of("-_")), {"pgfleet_host"});
  db_.Scalar("insert into pgfleet.host_logins (login, host_id, auto_admit) select '" + name +
             "', '" + prefix + "' || i, true from generate_series(1, " + std::to_string(n) + ") i");
  std::vector<std::string> argv = {BinaryPath("pgfleet-hostd"), "--db", db_.DsnAs(name),
                                   "--token-file", token_file_, "--simulate", std::to_string(n),
                                   "--id-prefix", prefix, "--heartbeat-interval", "0.5",
                                   "--host-ttl", "3", "--db-connections", "1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  procs_.push_back(std::make_unique<Process>(argv, dir_.path() + "/hollow-" + prefix + ".log"));
  if (login) *login = name;
  return *procs_.back();
}

Process& Cluster::StartHost(const std::string& id, int cpu, int memory,
                            std::vector<std::string> extra, std::vector<std::string> wrapper) {
  std::vector<std::string> argv = {BinaryPath("pgfleet-hostd"),
                                   "--id",
                                   id,
                                   "--token-file",
                                   token_file_,
                                   "--cpu",
                                   std::to_string(cpu),
                                   "--memory",
                                   std::to_string(memory),
                                   "--data-dir",
                                   dir_.path() + "/" + id,
                                   "--heartbeat-interval",
                                   "0.5"};
  // Defaults that `extra` may override.
  for (const auto& [flag, value] : {std::pair<std::string, std::string>{"--db", db_.dsn()},
                                    {"--reconcile-interval", "1"},
                                    // Tests must not depend on how full this machine's disk is.
                                    {"--gc-disk-percent", "100"},
                                    {"--disk-full-percent", "100"}}) {
    if (std::find(extra.begin(), extra.end(), flag) != extra.end()) continue;
    argv.push_back(flag);
    argv.push_back(value);
  }
  bool has_driver = false;
  for (const auto& e : extra) has_driver |= e == "--driver";
  if (!has_driver) {
    argv.push_back("--driver");
    argv.push_back("process");
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.begin(), wrapper.begin(), wrapper.end());
  procs_.push_back(std::make_unique<Process>(argv, dir_.path() + "/" + id + ".log"));
  return *procs_.back();
}

bool Cluster::WaitHostsUp(int n, std::chrono::milliseconds timeout) {
  return WaitFor(
      [&] {
        return db_.Count("select count(*) from pgfleet.host_status where state = 'up' and alive") >=
               n;
      },
      timeout);
}

CommandResult Cluster::Cli(std::vector<std::string> args, std::chrono::seconds timeout) {
  return CliAs(db_.dsn(), std::move(args), timeout);
}

CommandResult Cluster::CliAs(const std::string& dsn, std::vector<std::string> args,
                             std::chrono::seconds timeout) {
  std::vector<std::string> argv = {BinaryPath("pgfleet")};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv, {"PGFLEET_DB=" + dsn, "PGFLEET_TOKEN_FILE=" + token_file_}, timeout);
}

CommandResult Cluster::CliNoToken(const std::string& dsn, std::vector<std::string> args,
                                  std::chrono::seconds timeout) {
  std::vector<std::string> argv = {BinaryPath("pgfleet")};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv, {"PGFLEET_DB=" + dsn, "PGFLEET_TOKEN_FILE="}, timeout);
}

PgBouncer::PgBouncer(const TestDatabase& db, int pool_size, const std::vector<std::string>& logins,
                     Settings settings) {
  const std::string binary = "/usr/sbin/pgbouncer";
  if (access(binary.c_str(), X_OK) != 0) {
    throw std::runtime_error(binary + " not found (scripts/install-deps installs pgbouncer)");
  }
  std::string server_host = "127.0.0.1", server_port = "5432";
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(db.dsn().c_str(), &err);
  if (!opts) throw std::runtime_error("cannot parse the test DSN");
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    if (!o->val) continue;
    if (std::string(o->keyword) == "host") server_host = o->val;
    if (std::string(o->keyword) == "port") server_port = o->val;
  }
  PQconninfoFree(opts);
  // pgbouncer will not run as root: -u switches to postgres, who must be able
  // to write its log here.
  if (getuid() == 0 && chmod(dir_.path().c_str(), 0777) != 0) {
    throw std::runtime_error("cannot prepare " + dir_.path());
  }
  port_ = FreeLoopbackPort();
  {
    std::ofstream users(dir_.path() + "/users.txt");
    users << "\"postgres\" \"\"\n";
    for (const auto& login : logins) users << "\"" << login << "\" \"\"\n";
  }
  std::ofstream(dir_.path() + "/pgbouncer.ini")
      // connect_query: what hostd sets per session when it connects directly
      // (docs/operations.md, "A large fleet").
      << "[databases]\n* = host=" << server_host << " port=" << server_port
      << " connect_query='set jit = off'\n"
      << "[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " << port_ << "\n"
      << "unix_socket_dir =\nauth_type = trust\nauth_file = " << dir_.path() << "/users.txt\n"
      << "admin_users = postgres\npool_mode = transaction\n"
      << "default_pool_size = " << pool_size << "\nmax_client_conn = 500\n"
      // docs/operations.md, "A large fleet": after a failed server login
      // (PostgreSQL still starting after a restart) pgbouncer waits this long
      // before trying again, 15 s by default, longer than the host TTL.
      << (settings == Settings::kAsDocumented ? "server_login_retry = 1\n" : "");
  std::vector<std::string> argv = {binary};
  if (getuid() == 0) argv.insert(argv.end(), {"-u", "postgres"});
  argv.push_back(dir_.path() + "/pgbouncer.ini");
  process_ = std::make_unique<Process>(argv, dir_.path() + "/pgbouncer.out");
  bool up = WaitFor(
      [&] {
        if (!process_->Running()) return true;  // reported below
        try {
          pqxx::connection c(Dsn(db));
          return true;
        } catch (const std::exception&) {
          return false;
        }
      },
      std::chrono::seconds(10));
  if (!up || !process_->Running()) throw std::runtime_error("pgbouncer did not start: " + Log());
}

std::string PgBouncer::Dsn(const TestDatabase& db, const std::string& login) const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " user=" + login + " dbname=" + db.name();
}

PgBouncer::Pool PgBouncer::PoolOf(const std::string& dbname, const std::string& login) const {
  // libpq itself: libpqxx refuses the admin console's server version, and the
  // console speaks the simple query protocol only.
  std::string dsn =
      "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=pgbouncer";
  PGconn* conn = PQconnectdb(dsn.c_str());
  PGresult* res = PQstatus(conn) == CONNECTION_OK ? PQexec(conn, "show pools") : nullptr;
  if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
    std::string why = PQerrorMessage(conn);
    if (res) PQclear(res);
    PQfinish(conn);
    throw std::runtime_error("show pools on pgbouncer: " + why);
  }
  auto value = [&](int row, const char* col) {
    int c = PQfnumber(res, col);
    if (c < 0) throw std::runtime_error(std::string("show pools has no column ") + col);
    return std::string(PQgetvalue(res, row, c));
  };
  Pool pool;
  for (int r = 0; r < PQntuples(res); ++r) {
    if (value(r, "database") != dbname || value(r, "user") != login) continue;
    pool.clients += std::stoi(value(r, "cl_active")) + std::stoi(value(r, "cl_waiting"));
    for (const char* col : {"sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"}) {
      pool.servers += std::stoi(value(r, col));
    }
  }
  PQclear(res);
  PQfinish(conn);
  return pool;
}

std::string PgBouncer::Log() const { return process_ ? process_->Log() : ""; }

std::string Cluster::Logs() const {
  std::string out;
  for (const auto& p : procs_) out += "----\n" + p->Log();
  return out;
}

void OneHostClusterTest::SetUp() {
  cluster_ = std::make_unique<Cluster>(db_);
  cluster_->StartScheduler("s1");
  cluster_->StartHost("h1", 4000, 4000);
  ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
}

void OneHostClusterTest::TearDown() {
  if (HasFailure()) std::cerr << cluster_->Logs();
}

}  // namespace pgfleet::testing
