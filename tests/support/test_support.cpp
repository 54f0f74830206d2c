#include "test_support.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/db/migrate.h"

namespace pgfleet::testing {

namespace fs = std::filesystem;

std::string AdminDsn() {
  const char* dsn = std::getenv("PGFLEET_TEST_DSN");
  if (!dsn || !*dsn) {
    ADD_FAILURE()
        << "PGFLEET_TEST_DSN is not set: run the tests through scripts/test, which starts "
           "a throwaway PostgreSQL";
    throw std::runtime_error("PGFLEET_TEST_DSN is not set");
  }
  return dsn;
}

namespace {
std::atomic<int> g_counter{0};

std::string ReplaceDbName(const std::string& dsn, const std::string& db) {
  std::string out;
  std::istringstream in(dsn);
  std::string word;
  while (in >> word) {
    if (word.rfind("dbname=", 0) == 0) continue;
    out += word + " ";
  }
  return out + "dbname=" + db;
}
}  // namespace

TestDatabase::TestDatabase(bool migrate) : admin_(AdminDsn()) { Create(migrate); }

TestDatabase::TestDatabase(const std::string& admin_dsn, bool migrate) : admin_(admin_dsn) {
  Create(migrate);
}

void TestDatabase::Create(bool migrate) {
  name_ = "pgfleet_t_" + std::to_string(getpid()) + "_" + std::to_string(g_counter++);
  {
    pqxx::connection c(admin_);
    pqxx::nontransaction tx(c);
    tx.exec0("drop database if exists " + name_);
    tx.exec0("create database " + name_);
  }
  dsn_ = ReplaceDbName(admin_, name_);
  if (migrate) {
    pqxx::connection c(dsn_);
    db::Migrate(c);
  }
}

TestDatabase::~TestDatabase() {
  try {
    pqxx::connection c(admin_);
    pqxx::nontransaction tx(c);
    tx.exec0("drop database if exists " + name_ + " with (force)");
  } catch (const std::exception&) {
  }
}

std::unique_ptr<pqxx::connection> TestDatabase::Connect() const {
  return std::make_unique<pqxx::connection>(dsn_);
}

std::string TestDatabase::Scalar(const std::string& sql) const {
  pqxx::connection c(dsn_);
  pqxx::work tx(c);
  auto r = tx.exec(sql);
  tx.commit();
  return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
}

long long TestDatabase::AttemptsWithRepeated(const std::string& kind) const {
  pqxx::connection c(dsn_);
  pqxx::work tx(c);
  return tx
      .exec_params1(
          "select count(*) from (select job_id, attempt from pgfleet.job_events"
          " where kind = $1 group by 1, 2 having count(*) > 1) x",
          kind)[0]
      .as<long long>();
}

TempDir::TempDir() {
  const char* base = std::getenv("PGFLEET_TEST_TMP");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/pgfleet-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
  chmod(path_.c_str(), 0755);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string BinaryPath(const std::string& name) {
  return std::string(PGFLEET_BINARY_DIR) + "/" + name;
}
std::string SourcePath(const std::string& rel) {
  return std::string(PGFLEET_SOURCE_DIR) + "/" + rel;
}

static pid_t Spawn(const std::vector<std::string>& argv, int out_fd, int err_fd,
                   const std::vector<std::string>& extra_env) {
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  for (const auto& e : extra_env) env.push_back(e);
  std::vector<char*> cenv;
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  return pid;
}

Process::Process(std::vector<std::string> argv, std::string log_path,
                 std::vector<std::string> extra_env)
    : argv_(std::move(argv)), log_path_(std::move(log_path)) {
  int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + log_path_);
  pid_ = Spawn(argv_, fd, fd, extra_env);
  close(fd);
}

Process::~Process() {
  if (!reaped_) Stop(std::chrono::seconds(5));
}

void Process::Signal(int sig) {
  if (!reaped_) kill(pid_, sig);
}

bool Process::Running() {
  if (reaped_) return false;
  pid_t r = waitpid(pid_, &status_, WNOHANG);
  if (r == pid_) reaped_ = true;
  return !reaped_;
}

int Process::Stop(std::chrono::milliseconds timeout) {
  if (reaped_) return status_;
  kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!Running()) return status_;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Kill9();
  return status_;
}

void Process::Kill9() {
  if (reaped_) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, &status_, 0);
  reaped_ = true;
}

std::string Process::Log() const {
  std::ifstream f(log_path_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

static std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

CommandResult Run(const std::vector<std::string>& argv, std::vector<std::string> extra_env,
                  std::chrono::seconds timeout) {
  TempDir tmp;
  std::string out = tmp.path() + "/out", err = tmp.path() + "/err";
  int ofd = open(out.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  int efd = open(err.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  pid_t pid = Spawn(argv, ofd, efd, extra_env);
  close(ofd);
  close(efd);
  CommandResult res;
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      res.err = "timed out\n";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  res.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  res.out = Slurp(out);
  res.err += Slurp(err);
  return res;
}

std::vector<std::string> Subdirs(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (e->d_type == DT_DIR && n != "." && n != "..") out.push_back(n);
  }
  closedir(d);
  return out;
}

bool ProcessGone(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (stat.empty()) return true;
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

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

PrivatePostgres::PrivatePostgres(const std::string& extra_listen) : extra_listen_(extra_listen) {
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

void PrivatePostgres::PgCtl(const std::string& action) {
  std::vector<std::string> argv = {bindir_ + "/pg_ctl",
                                   "-D",
                                   dir_.path() + "/data",
                                   "-l",
                                   dir_.path() + "/server.log",
                                   "-w",
                                   "-t",
                                   "60",
                                   "-m",
                                   "fast"};
  if (action != "stop") {
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

Cluster::Cluster(const TestDatabase& db) : db_(db) {
  token_file_ = dir_.path() + "/token";
  std::ofstream(token_file_) << "test-token-" << getpid() << "-" << g_counter++ << "\n";
}

Cluster::~Cluster() {
  // Jobs outlive hostd by design; a test must not leave its jobs behind.
  try {
    pqxx::connection c(db_.dsn());
    pqxx::work tx(c);
    for (const auto& r : tx.exec("select pid from pgfleet.jobs where pid is not null and state in "
                                 "('assigned', 'running')")) {
      pid_t pid = r[0].as<int>();
      if (pid > 1) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
      }
    }
  } catch (const std::exception&) {
  }
  // Hosts first, then schedulers: reverse start order.
  for (auto it = procs_.rbegin(); it != procs_.rend(); ++it) (*it)->Stop(std::chrono::seconds(5));
}

Process& Cluster::StartScheduler(const std::string& id, std::vector<std::string> extra) {
  std::vector<std::string> argv = {BinaryPath("pgfleet-schedulerd"),
                                   "--db",
                                   db_.dsn(),
                                   "--id",
                                   id,
                                   "--token-file",
                                   token_file_,
                                   "--tick",
                                   "0.5"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  procs_.push_back(std::make_unique<Process>(argv, dir_.path() + "/" + id + ".log"));
  return *procs_.back();
}

Process& Cluster::StartHost(const std::string& id, int cpu, int memory,
                            std::vector<std::string> extra) {
  std::vector<std::string> argv = {BinaryPath("pgfleet-hostd"),
                                   "--db",
                                   db_.dsn(),
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
                                   "0.5",
                                   "--reconcile-interval",
                                   "1"};
  bool has_driver = false;
  for (const auto& e : extra) has_driver |= e == "--driver";
  if (!has_driver) {
    argv.push_back("--driver");
    argv.push_back("process");
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
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
  std::vector<std::string> argv = {BinaryPath("pgfleet")};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv, {"PGFLEET_DB=" + db_.dsn(), "PGFLEET_TOKEN_FILE=" + token_file_}, timeout);
}

std::string Cluster::Logs() const {
  std::string out;
  for (const auto& p : procs_) out += "----\n" + p->Log();
  return out;
}

}  // namespace pgfleet::testing
