#pragma once
// A client-side deadline on a daemon's database work.
//
// TCP keepalives and tcp_user_timeout (connection.h, DaemonDsn) catch a peer
// that stops answering at the network level, and statement_timeout a
// statement the server works on too long. Neither catches a backend that is
// stopped (SIGSTOP, a paused VM, a process stuck in the kernel): the kernel
// still acknowledges every packet and the server never runs the timer. A
// Deadline does: while it is alive, if its time passes, a watchdog thread
// shuts the connection's socket down, so whatever libpq waits on fails at
// once with pqxx::broken_connection and the daemon reconnects on a new
// backend, as after any broken connection.
//
// Usage, around one unit of work (a host's heartbeat and report batch, one
// formation's pass):
//
//   db::Deadline deadline(conn, std::chrono::seconds(10), "scheduler s1");
//   ... statements ...
//   deadline.Renew();  // between units of a long loop
//
// The connection must outlive the Deadline (destroy it before reopening).
// Thread-safe: one watchdog thread serves every Deadline of the process.

#include <chrono>
#include <cstdint>
#include <pqxx/pqxx>
#include <string>

namespace pgfleet::db {

class Deadline {
 public:
  Deadline(pqxx::connection_base& conn, std::chrono::milliseconds limit, std::string who);
  ~Deadline();
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  // Starts the same limit again from now.
  void Renew();

  // How many deadlines of this process fired (for metrics and tests).
  static int64_t Fired();

 private:
  uint64_t id_;
};

// Shuts conn's socket down now, as a fired Deadline does: for a connection
// about to be abandoned, so that what its destructors still send (UNLISTEN,
// ROLLBACK) fails at once instead of waiting on a backend that may not answer.
void ShutDownSocket(pqxx::connection_base& conn);

}  // namespace pgfleet::db
