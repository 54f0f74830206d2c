#pragma once
// A daemon's HTTP listener: binds --listen (HOST:PORT, port 0 picks a free
// port), serves GET /health and /metrics next to whatever routes the daemon
// adds, on a thread of its own; HTTPS with --tls-cert and --tls-key (and
// client certificates required with --tls-ca too).
//
// What must hold: Bind before Serve; add routes to server() before Serve;
// Stop (or the destructor) stops serving and joins the thread. The daemon may
// learn its port (for an advertised URL) between Bind and Serve; connections
// that arrive meanwhile wait in the socket's backlog.

#include <httplib.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/daemon/flags.h"
#include "core/metrics/metrics.h"
#include "core/net/connection_guard.h"

namespace pgfleet::daemon {

class HttpListener {
 public:
  HttpListener() = default;
  ~HttpListener() { Stop(); }
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Binds flags.common().listen. Returns std::nullopt on success, else the
  // exit code for main: 2 for a malformed --listen (usage printed), 1 when
  // the address cannot be bound (logged).
  std::optional<int> Bind(const Flags& flags);

  httplib::Server& server() { return *server_; }
  // "https" with --tls-cert and --tls-key, else "http".
  const char* scheme() const { return tls_ ? "https" : "http"; }
  // Bounds slow and numerous clients (core/net/connection_guard.h).
  net::ConnectionGuard& guard() { return guard_; }
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  std::string address() const { return host_ + ":" + std::to_string(port_); }

  // Adds /health and /metrics (answering as `who`) and starts serving.
  void Serve(const metrics::Registry& metrics, const std::string& who);
  void Stop();

 private:
  // An httplib::SSLServer with --tls-cert (made by Bind; until then plain).
  std::unique_ptr<httplib::Server> server_ = std::make_unique<httplib::Server>();
  bool tls_ = false;
  net::ConnectionGuard guard_;
  std::string host_;
  int port_ = -1;
  std::thread thread_;
};

}  // namespace pgfleet::daemon
