#pragma once
// Connecting to the pgfleet database, with the one rule for finding it:
// --db, else $PGFLEET_DB, else libpq's own PG* variables.

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <pqxx/pqxx>
#include <string>

namespace pgfleet::db {

// The DSN to use given the --db flag value (may be empty).
std::string ResolveDsn(const std::string& flag_value);
// Why libpq cannot parse dsn as a connection string ("" when it can, or
// when dsn is empty and libpq's PG* variables apply).
std::string DsnProblem(const std::string& dsn);

// The DSN a daemon connects with: `dsn` (key=value or URI; empty = libpq's
// PG* variables) with connect_timeout, TCP keepalives and tcp_user_timeout
// added where it does not set them, so a hung connection fails in seconds.
std::string DaemonDsn(const std::string& dsn);
// The fallback_application_name DaemonDsn adds ("" = none): each daemon sets
// its own at start (pgfleet-schedulerd: the database tells its sessions from
// others', e.g. who holds a formation's lock). Not thread-safe: set it first.
void SetDaemonApplicationName(const std::string& name);

// Opens a connection; throws pqxx::broken_connection on failure.
std::unique_ptr<pqxx::connection> Connect(const std::string& dsn);

// Keeps one connection and reopens it after failures with capped exponential
// backoff. Logs once per state change (lost / restored), not once per retry.
class ReconnectingConnection {
 public:
  ReconnectingConnection(std::string dsn, std::string who);
  // Runs on every newly opened connection before Get() returns it (prepare
  // the process's statements here). An exception from it counts as a failed
  // connection attempt.
  void SetOnConnect(std::function<void(pqxx::connection&)> on_connect) {
    on_connect_ = std::move(on_connect);
  }
  // The longest wait between two attempts (default 5 s). A host sets its
  // heartbeat interval: its lease runs out a TTL after its last heartbeat
  // whatever the reason, so a reconnect that waits 5 s after a 6 s outage
  // would fence its jobs although the database was back well within the TTL.
  void SetMaxBackoff(std::chrono::milliseconds max) {
    max_backoff_ = std::max(max, std::chrono::milliseconds(kFirstBackoffMs));
  }
  // Returns an open connection or nullptr when the database is unreachable now
  // (and the backoff has not yet elapsed, or the attempt failed).
  pqxx::connection* Get();
  bool IsOpen() const { return conn_ && conn_->is_open(); }
  // Call when an operation on the connection failed with broken_connection.
  void MarkBroken(const std::string& why);
  // True when the last Get() had to open a new connection (caller re-LISTENs / reconciles).
  bool TakeReconnected();

 private:
  std::string dsn_;
  std::string who_;
  std::function<void(pqxx::connection&)> on_connect_;
  std::unique_ptr<pqxx::connection> conn_;
  std::chrono::steady_clock::time_point next_try_{};
  static constexpr int kFirstBackoffMs = 200;
  std::chrono::milliseconds backoff_{0};
  std::chrono::milliseconds max_backoff_{5000};
  bool down_logged_ = false;
  bool reconnected_ = false;
};

}  // namespace pgfleet::db
