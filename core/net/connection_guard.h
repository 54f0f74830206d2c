#pragma once
// Bounds what slow or numerous clients can hold of an httplib server.
//
// httplib gives each connection a thread of its pool for as long as it lasts
// and times out single reads only, so a client sending one header line every
// 2 s (slowloris), or a body one byte at a time, holds a thread forever, and a
// handful of them starve /health and every dispatch. The guard watches the
// server's connections from a thread of its own (every 250 ms it lists the
// process's sockets whose local port is the server's) and shuts down:
//
//   - a connection still sending its request `request_deadline` after it
//     was accepted or after its previous answer (headers and body alike);
//   - connections beyond `max_per_peer` from one address, or beyond
//     `max_connections` in all (the newest first).
//
// A request counts as arrived when its handler starts (Busy), so a handler
// that takes long is never cut; the next request's clock starts when the
// handler is done (post-routing). A streamed answer (logs) keeps its
// connection by calling the Touch() it got from Toucher(req) for each chunk.
// The pool must have more threads than max_connections (ThreadCount) so every
// admitted connection gets one.
//
// Authentication (a pre-routing handler) runs before any body is read; an
// unauthorized request's connection is closed after the answer
// (CloseAfterAnswer), so a body it did not read cannot be taken for the next
// request.

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "core/util/mutex.h"

namespace pgfleet::net {

struct ConnectionLimits {
  std::chrono::milliseconds request_deadline{10000};
  int max_connections = 128;
  int max_per_peer = 64;
};

class ConnectionGuard {
 public:
  explicit ConnectionGuard(ConnectionLimits limits = {});
  ~ConnectionGuard();
  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

  // Sets the server's thread pool and post-routing hook; call before it listens.
  void Install(httplib::Server& server);
  // Starts watching the server's connections (its bound port).
  void Start(int port);
  void Stop();

  // The request's handler starts: its connection is busy, not sending.
  void Busy(const httplib::Request& req);
  // For streamed answers: marks the request's connection as making progress.
  std::function<void()> Toucher(const httplib::Request& req);
  // Connections shut down so far (deadline or caps).
  long cut() const { return cut_; }

  // Pool threads for these limits: every admitted connection gets one.
  static size_t ThreadCount(const ConnectionLimits& limits) {
    return static_cast<size_t>(limits.max_connections) + 16;
  }
  const ConnectionLimits& limits() const { return limits_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Conn {
    Clock::time_point since;  // accepted, or its previous answer started
    bool busy = false;        // a handler runs
    int fd = -1;
  };
  void Idle(const httplib::Request& req);
  void Watch();
  void Scan();

  ConnectionLimits limits_;
  int port_ = -1;
  util::Mutex mu_;
  std::map<std::string, Conn> conns_ GUARDED_BY(mu_);  // by "peer-ip:peer-port"
  std::atomic<bool> stop_{false};
  std::atomic<long> cut_{0};
  std::thread watcher_;
};

// Makes httplib close the connection once this answer is written.
void CloseAfterAnswer(httplib::Response& res);

}  // namespace pgfleet::net
