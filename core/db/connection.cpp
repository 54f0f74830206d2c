#include "core/db/connection.h"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <utility>
#include <vector>

#include "core/db/queries.sql.h"
#include "core/db/statements.h"
#include "core/util/text.h"

namespace pgfleet::db {

std::string ResolveDsn(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* env = std::getenv("PGFLEET_DB"); env && *env) return env;
  return "";  // libpq reads PGHOST, PGPORT, PGDATABASE, ...
}

std::string DsnProblem(const std::string& dsn) {
  if (dsn.empty()) return "";  // libpq's PG* variables
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
  if (opts) {
    PQconninfoFree(opts);
    return "";
  }
  std::string why = err ? util::Trim(err) : "out of memory";
  if (err) PQfreemem(err);
  return why;
}

namespace {
std::string g_application_name;
}  // namespace

void SetDaemonApplicationName(const std::string& name) { g_application_name = name; }

std::string DaemonDsn(const std::string& dsn) {
  // What a daemon needs so that a connection that hangs (a peer that stops
  // answering, packets dropped) fails within seconds instead of when TCP
  // gives up, minutes later: a connect timeout, keepalives, and
  // tcp_user_timeout, which also covers data sent and never acknowledged
  // (keepalives alone do not). Options the DSN sets are left as they are.
  static const std::vector<std::pair<std::string, std::string>> kDefaults = {
      {"connect_timeout", "5"},     {"keepalives", "1"},       {"keepalives_idle", "5"},
      {"keepalives_interval", "2"}, {"keepalives_count", "3"}, {"tcp_user_timeout", "10000"}};
  std::vector<std::pair<std::string, std::string>> given;
  if (!dsn.empty()) {
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
    if (!opts) {
      if (err) PQfreemem(err);
      return dsn;  // let the connection report what is wrong with it
    }
    for (PQconninfoOption* o = opts; o->keyword; ++o) {
      if (o->val) given.emplace_back(o->keyword, o->val);
    }
    PQconninfoFree(opts);
  }
  auto quoted = [](const std::string& v) {
    std::string out = "'";
    for (char c : v) {
      if (c == '\\' || c == '\'') out += '\\';
      out += c;
    }
    return out + "'";
  };
  std::string out;
  for (const auto& [k, v] : given) out += k + "=" + quoted(v) + " ";
  for (const auto& [k, v] : kDefaults) {
    bool set = false;
    for (const auto& g : given) set |= g.first == k;
    if (!set) out += k + "=" + v + " ";
  }
  if (!g_application_name.empty()) {
    out += "fallback_application_name=" + quoted(g_application_name) + " ";
  }
  return out;
}

std::unique_ptr<pqxx::connection> Connect(const std::string& dsn) {
  return std::make_unique<pqxx::connection>(dsn);
}

ReconnectingConnection::ReconnectingConnection(std::string dsn, std::string who)
    : dsn_(std::move(dsn)), who_(std::move(who)) {}

pqxx::connection* ReconnectingConnection::Get() {
  if (conn_ && conn_->is_open()) return conn_.get();
  auto now = std::chrono::steady_clock::now();
  if (now < next_try_) return nullptr;
  try {
    conn_ = Connect(DaemonDsn(dsn_));
    // No JIT and a statement_timeout (kSessionDefaults says why). Through a
    // transaction pooler a session setting would stay on whichever server
    // connection ran it: the pooler sets these for every server connection
    // instead (docs/operations.md).
    if (!UnnamedStatements()) pqxx::nontransaction(*conn_).exec(kSessionDefaults.sql);
    if (on_connect_) on_connect_(*conn_);
    if (down_logged_) spdlog::warn("{}: database connection restored", who_);
    down_logged_ = false;
    backoff_ = std::chrono::milliseconds(0);
    reconnected_ = true;
    return conn_.get();
  } catch (const std::exception& e) {
    conn_.reset();
    backoff_ = backoff_.count() == 0 ? std::chrono::milliseconds(kFirstBackoffMs)
                                     : std::min(backoff_ * 2, max_backoff_);
    next_try_ = now + backoff_;
    if (!down_logged_) {
      spdlog::error("{}: database unreachable, retrying with backoff: {}", who_, e.what());
      down_logged_ = true;
    }
    return nullptr;
  }
}

void ReconnectingConnection::MarkBroken(const std::string& why) {
  if (!down_logged_) {
    spdlog::error("{}: database connection lost: {}", who_, why);
    down_logged_ = true;
  }
  conn_.reset();
  backoff_ = std::chrono::milliseconds(kFirstBackoffMs);
  next_try_ = std::chrono::steady_clock::now() + backoff_;
}

bool ReconnectingConnection::TakeReconnected() {
  bool r = reconnected_;
  reconnected_ = false;
  return r;
}

}  // namespace pgfleet::db
