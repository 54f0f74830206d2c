#pragma once
// Keep-alive HTTP connections to hosts' APIs, reused across requests and
// scheduler passes (docs/decisions/0001).
//
// Connections are pooled per origin (http://host:port), as HTTP clients do,
// so the hollow hosts behind one listener (hostd/hollow/hollow.h) share them. At most
// max_per_origin requests to one origin are in flight at once (more wait for
// a free connection): hostd's listener serves one connection per thread, and
// an idle keep-alive connection holds its thread, so the bound protects it.
// An idle connection is closed after idle_ttl, well before the server's own
// keep-alive timeout (5 s), so a request never races the server closing it.
// A connection whose request failed is closed, never reused. Thread-safe.

#include <httplib.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/util/mutex.h"

namespace pgfleet::net {

class ClientPool {
 public:
  struct Options {
    int max_per_origin = 8;
    std::chrono::milliseconds idle_ttl{2000};
  };
  ClientPool(std::string token, Options options);
  ~ClientPool();
  ClientPool(const ClientPool&) = delete;
  ClientPool& operator=(const ClientPool&) = delete;

  // POSTs body (JSON) to base_url + path, where base_url is a host's api_url
  // (http://host[:port][/prefix]), with extra headers. Throws
  // std::invalid_argument for a bad URL.
  httplib::Result Post(const std::string& base_url, const std::string& path,
                       const std::string& body, int timeout_seconds,
                       const httplib::Headers& headers = {});

  // Connections open now (idle and in use), for tests and metrics.
  int OpenConnections() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Idle {
    std::unique_ptr<httplib::Client> client;
    Clock::time_point since;
  };
  struct Origin {
    std::vector<Idle> idle;  // most recently used last
    int in_use = 0;
  };
  std::unique_ptr<httplib::Client> Acquire(const std::string& origin);
  void Release(const std::string& origin, std::unique_ptr<httplib::Client> client, bool reuse);

  const std::string token_;
  const Options options_;
  mutable util::Mutex mu_;
  util::CondVar freed_;
  std::map<std::string, Origin> origins_ GUARDED_BY(mu_);
};

}  // namespace pgfleet::net
