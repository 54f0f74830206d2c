#include "cli/ui/ui_store.h"

#include "cli/queries.h"
#include "cli/ui/ui_queries.sql.h"
#include "core/db/statements.h"

namespace pgfleet::cli::ui {

UiStore::UiStore(std::string dsn, int connections) : dsn_(std::move(dsn)), max_(connections) {}

UiStore::~UiStore() = default;

std::unique_ptr<pqxx::connection> UiStore::Take() {
  {
    std::unique_lock lock(mu_);
    free_.wait(lock, [this] { return !idle_.empty() || open_ < max_; });
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return conn;
    }
    ++open_;
  }
  try {
    auto conn = std::make_unique<pqxx::connection>(dsn_);
    db::PrepareAll(*conn, {&kSummary, &kHosts, &kFormations, &kJobs, &kJob, &kFingerprint});
    PrepareQueries(*conn);  // the CLI's, for log tickets and where attempts ran
    return conn;
  } catch (...) {
    std::lock_guard lock(mu_);
    --open_;
    free_.notify_one();
    throw;
  }
}

void UiStore::Give(std::unique_ptr<pqxx::connection> conn) {
  std::lock_guard lock(mu_);
  if (conn && conn->is_open()) {
    idle_.push_back(std::move(conn));
  } else {
    --open_;
  }
  free_.notify_one();
}

template <typename T>
T UiStore::With(const std::function<T(pqxx::connection&)>& fn) {
  auto conn = Take();
  try {
    T out = fn(*conn);
    Give(std::move(conn));
    return out;
  } catch (const pqxx::broken_connection&) {
    Give(nullptr);
    throw;
  } catch (...) {
    // A statement that failed leaves the connection usable (its transaction
    // was rolled back), unless the failure was the connection's.
    Give(conn->is_open() ? std::move(conn) : nullptr);
    throw;
  }
}

void UiStore::Check() {
  With<int>([](pqxx::connection&) { return 0; });
}

namespace {
// The one document a statement returns.
template <typename... Args>
std::string Doc(pqxx::connection& conn, const db::Statement& s, Args&&... args) {
  pqxx::read_transaction tx(conn);
  auto row = db::Exec1(tx, s, std::forward<Args>(args)...);
  return row["doc"].template as<std::string>();
}
}  // namespace

std::string UiStore::Summary() {
  return With<std::string>([](pqxx::connection& c) { return Doc(c, kSummary); });
}

std::string UiStore::Hosts() {
  return With<std::string>([](pqxx::connection& c) { return Doc(c, kHosts); });
}

std::string UiStore::Formations() {
  return With<std::string>([](pqxx::connection& c) { return Doc(c, kFormations); });
}

std::string UiStore::Jobs(const JobsQuery& q) {
  return With<std::string>([&q](pqxx::connection& c) {
    return Doc(c, kJobs, q.state, q.formation, q.host, q.owner, q.limit);
  });
}

std::optional<JobDocument> UiStore::Job(int64_t id) {
  return With<std::optional<JobDocument>>([id](pqxx::connection& c) {
    pqxx::read_transaction tx(c);
    auto r = db::Exec(tx, kJob, id);
    if (r.empty()) return std::optional<JobDocument>();
    return std::optional<JobDocument>(
        JobDocument{r[0]["doc"].as<std::string>(), r[0]["api_url"].as<std::string>()});
  });
}

std::string UiStore::AttemptHostApi(int64_t id, int attempt) {
  return With<std::string>([id, attempt](pqxx::connection& c) {
    pqxx::read_transaction tx(c);
    auto ran = GetAttemptHost(tx, id, attempt);
    return ran ? ran->api_url : std::string();
  });
}

std::string UiStore::LogTicket(int64_t id, int attempt, std::string* why) {
  return With<std::string>(
      [id, attempt, why](pqxx::connection& c) { return cli::LogTicket(c, id, attempt, why); });
}

std::string UiStore::Fingerprint() {
  return With<std::string>([](pqxx::connection& c) {
    pqxx::read_transaction tx(c);
    return db::Exec1(tx, kFingerprint)["fingerprint"].as<std::string>();
  });
}

}  // namespace pgfleet::cli::ui
