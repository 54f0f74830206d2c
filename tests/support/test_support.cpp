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

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/db/migrate.h"
#include "hostd/drivers/container/cgroup.h"
#include "core/net/ticket.h"

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
    for (const auto& login : logins_) tx.exec0("drop role if exists " + c.quote_name(login));
  } catch (const std::exception&) {
  }
}

std::string TestDatabase::CreateLogin(const std::string& base,
                                      const std::vector<std::string>& groups) const {
  std::string login = base + "_" + name_;
  pqxx::connection c(dsn_);
  pqxx::nontransaction tx(c);
  tx.exec0("drop role if exists " + c.quote_name(login));
  std::string sql = "create role " + c.quote_name(login) + " login";
  for (size_t i = 0; i < groups.size(); ++i)
    sql += (i ? ", " : " in role ") + c.quote_name(groups[i]);
  tx.exec0(sql);
  logins_.push_back(login);
  return login;
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

std::vector<std::string> HostCgroupDirs(const std::string& host) {
  std::vector<std::string> out;
  const hostd::CgroupSystem* sys = hostd::CgroupSystem::Get(nullptr);
  if (!sys) return out;
  for (const auto& c : sys->controllers()) {
    const std::string base = sys->Dir(c, "pgfleet");
    for (const auto& scope : Subdirs(base)) {
      std::string dir = base + "/" + scope + "/" + host;
      struct stat st {};
      if (stat(dir.c_str(), &st) == 0 && std::find(out.begin(), out.end(), dir) == out.end()) {
        out.push_back(dir);
      }
    }
  }
  return out;
}

std::vector<long long> HostIdsOfProcess(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::vector<long long> ids;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Uid:", 0) != 0 && line.rfind("Gid:", 0) != 0 &&
        line.rfind("Groups:", 0) != 0) {
      continue;
    }
    std::istringstream in(line.substr(line.find(':') + 1));
    for (long long id; in >> id;) ids.push_back(id);
  }
  return ids;
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

double TestSlowdown() {
  static const double slowdown = [] {
    const char* v = std::getenv("PGFLEET_TEST_SLOWDOWN");
    double d = v ? std::atof(v) : 1;
    return d >= 1 && d <= 20 ? d : 1;
  }();
  return slowdown;
}

std::chrono::milliseconds Slowed(std::chrono::milliseconds limit) {
  return std::chrono::milliseconds(static_cast<int64_t>(limit.count() * TestSlowdown()));
}

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + Slowed(timeout);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

}  // namespace pgfleet::testing

namespace pgfleet::testing {

OvercommitSampler::OvercommitSampler(const TestDatabase& db) {
  thread_ = std::thread([this, &db] {
    while (!done_) {
      overcommitted_ += db.Count(
          "select count(*) from pgfleet.hosts where cpu_allocated > cpu or "
          "memory_allocated > memory or cpu_allocated < 0 or memory_allocated < 0");
      ++samples_;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

void OvercommitSampler::Stop() {
  done_ = true;
  if (thread_.joinable()) thread_.join();
}

std::string HostTicketKey(const TestDatabase& db, const std::string& host) {
  std::string key =
      db.Scalar("select encode(key, 'hex') from pgfleet.host_keys where host_id = '" + host + "'");
  if (key.empty()) ADD_FAILURE() << "host " << host << " has no key in pgfleet.host_keys";
  return key;
}

std::string SignDispatch(const TestDatabase& db, const std::string& host, const std::string& body) {
  auto doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("jobs") || !doc["jobs"].is_array()) {
    return body;
  }
  std::string key = HostTicketKey(db, host);
  for (auto& item : doc["jobs"]) {
    if (!item.is_object() || !item.contains("job") || !item["job"].is_number_integer() ||
        !item.contains("attempt") || !item["attempt"].is_number_integer()) {
      continue;
    }
    bool privileged = item.contains("spec") && item["spec"].is_object() &&
                      item["spec"].contains("privileged") && item["spec"]["privileged"] == true;
    item["ticket"] = net::SignTicket(
        {net::TicketKind::kDispatch, host, item["job"].get<int64_t>(), item["attempt"].get<int>(),
         privileged, net::UnixNow() + net::kTicketSeconds, ""},
        key);
  }
  return doc.dump();
}

std::string StopTicket(const TestDatabase& db, const std::string& host, int64_t job, int attempt) {
  return net::SignTicket(
      {net::TicketKind::kStop, host, job, attempt, false, net::UnixNow() + net::kTicketSeconds, ""},
      HostTicketKey(db, host));
}

}  // namespace pgfleet::testing
