#include "core/net/client_pool.h"

#include "core/net/endpoint.h"
#include "core/net/http.h"
#include "core/util/mutex.h"

namespace pgfleet::net {

ClientPool::ClientPool(std::string token, Options options)
    : token_(std::move(token)), options_(options) {}

ClientPool::~ClientPool() = default;

std::unique_ptr<httplib::Client> ClientPool::Acquire(const std::string& origin) {
  util::MutexLock lock(mu_);
  Origin& o = origins_[origin];
  freed_.wait(lock, [&] { mu_.AssertHeld(); return o.in_use < options_.max_per_origin; });
  ++o.in_use;
  auto now = Clock::now();
  while (!o.idle.empty()) {
    Idle last = std::move(o.idle.back());
    o.idle.pop_back();
    if (now - last.since < options_.idle_ttl) return std::move(last.client);
  }
  // Expired idle connections (older ones sit first) are dropped: stale ones
  // would race the server closing them.
  o.idle.clear();
  lock.unlock();
  auto client = MakeClient(origin, token_);
  client->set_keep_alive(true);
  return client;
}

void ClientPool::Release(const std::string& origin, std::unique_ptr<httplib::Client> client,
                         bool reuse) {
  {
    util::MutexLock lock(mu_);
    Origin& o = origins_[origin];
    --o.in_use;
    if (reuse && client) o.idle.push_back({std::move(client), Clock::now()});
  }
  freed_.notify_one();
  // A client not kept is destroyed here, outside the lock, closing its socket.
}

httplib::Result ClientPool::Post(const std::string& base_url, const std::string& path,
                                 const std::string& body, int timeout_seconds,
                                 const httplib::Headers& headers) {
  auto [origin, prefix] = SplitBaseUrl(base_url);
  std::unique_ptr<httplib::Client> client;
  try {
    client = Acquire(origin);
  } catch (...) {
    Release(origin, nullptr, false);
    throw;
  }
  client->set_connection_timeout(timeout_seconds, 0);
  client->set_read_timeout(timeout_seconds, 0);
  client->set_write_timeout(timeout_seconds, 0);
  auto res = client->Post((prefix + path).c_str(), headers, body, "application/json");
  bool reuse = static_cast<bool>(res) && res->get_header_value("Connection") != "close";
  Release(origin, std::move(client), reuse);
  return res;
}

int ClientPool::OpenConnections() const {
  util::MutexLock lock(mu_);
  int n = 0;
  for (const auto& [origin, o] : origins_) n += o.in_use + static_cast<int>(o.idle.size());
  return n;
}

}  // namespace pgfleet::net
