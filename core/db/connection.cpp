#include "core/db/connection.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace pgfleet::db {

std::string ResolveDsn(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* env = std::getenv("PGFLEET_DB"); env && *env) return env;
  return "";  // libpq reads PGHOST, PGPORT, PGDATABASE, ...
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
    conn_ = Connect(dsn_);
    if (on_connect_) on_connect_(*conn_);
    if (down_logged_) spdlog::warn("{}: database connection restored", who_);
    down_logged_ = false;
    backoff_ = std::chrono::milliseconds(0);
    reconnected_ = true;
    return conn_.get();
  } catch (const std::exception& e) {
    conn_.reset();
    backoff_ = backoff_.count() == 0 ? std::chrono::milliseconds(200)
                                     : std::min(backoff_ * 2, std::chrono::milliseconds(5000));
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
  backoff_ = std::chrono::milliseconds(200);
  next_try_ = std::chrono::steady_clock::now() + backoff_;
}

bool ReconnectingConnection::TakeReconnected() {
  bool r = reconnected_;
  reconnected_ = false;
  return r;
}

}  // namespace pgfleet::db
