#include "core/net/connection_guard.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <vector>

#include "core/util/mutex.h"

namespace pgfleet::net {
namespace {

std::string KeyOf(const std::string& ip, int port) { return ip + ":" + std::to_string(port); }

// The peer of a connected TCP socket whose local port is `port`: its key
// and address, or false for anything else (other sockets, listeners).
bool PeerOf(int fd, int port, std::string* key, std::string* ip) {
  sockaddr_storage local{}, peer{};
  socklen_t len = sizeof(local);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return false;
  int local_port = 0;
  if (local.ss_family == AF_INET) {
    local_port = ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  } else if (local.ss_family == AF_INET6) {
    local_port = ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
  } else {
    return false;
  }
  if (local_port != port) return false;
  len = sizeof(peer);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return false;  // listener
  char buf[INET6_ADDRSTRLEN] = {};
  int peer_port = 0;
  if (peer.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&peer);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    peer_port = ntohs(a->sin_port);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&peer);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    peer_port = ntohs(a->sin6_port);
  }
  *ip = buf;
  *key = KeyOf(*ip, peer_port);
  return true;
}

// The process's socket descriptors.
std::vector<int> SocketFds() {
  std::vector<int> out;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return out;
  int self = dirfd(d);
  while (auto* e = readdir(d)) {
    char* end;
    long fd = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || fd == self) continue;
    char target[64];
    ssize_t n = readlinkat(self, e->d_name, target, sizeof(target) - 1);
    if (n > 7 && std::string(target, 7) == "socket:") out.push_back(static_cast<int>(fd));
  }
  closedir(d);
  return out;
}

}  // namespace

ConnectionGuard::ConnectionGuard(ConnectionLimits limits) : limits_(limits) {}

ConnectionGuard::~ConnectionGuard() { Stop(); }

void ConnectionGuard::Install(httplib::Server& server) {
  const size_t threads = ThreadCount(limits_);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_post_routing_handler(
      [this](const httplib::Request& req, httplib::Response&) { Idle(req); });
}

void ConnectionGuard::Start(int port) {
  port_ = port;
  watcher_ = std::thread([this] { Watch(); });
}

void ConnectionGuard::Stop() {
  stop_ = true;
  if (watcher_.joinable()) watcher_.join();
}

void ConnectionGuard::Busy(const httplib::Request& req) {
  util::MutexLock lock(mu_);
  auto& c = conns_[KeyOf(req.remote_addr, req.remote_port)];
  c.busy = true;
  c.since = Clock::now();
}

void ConnectionGuard::Idle(const httplib::Request& req) {
  util::MutexLock lock(mu_);
  auto& c = conns_[KeyOf(req.remote_addr, req.remote_port)];
  c.busy = false;
  c.since = Clock::now();
}

std::function<void()> ConnectionGuard::Toucher(const httplib::Request& req) {
  std::string key = KeyOf(req.remote_addr, req.remote_port);
  return [this, key] {
    util::MutexLock lock(mu_);
    auto it = conns_.find(key);
    if (it != conns_.end()) it->second.since = Clock::now();
  };
}

void ConnectionGuard::Watch() {
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    try {
      Scan();
    } catch (const std::exception& e) {
      spdlog::warn("connection guard: {}", e.what());
    }
  }
}

void ConnectionGuard::Scan() {
  auto now = Clock::now();
  struct Seen {
    std::string key, ip;
    int fd;
  };
  std::vector<Seen> seen;
  for (int fd : SocketFds()) {
    Seen s{"", "", fd};
    if (PeerOf(fd, port_, &s.key, &s.ip)) seen.push_back(std::move(s));
  }
  std::map<std::string, std::pair<int, const char*>> cut;  // key -> fd, why
  {
    util::MutexLock lock(mu_);
    std::set<std::string> live;
    for (const auto& s : seen) {
      live.insert(s.key);
      auto [it, fresh] = conns_.try_emplace(s.key);
      if (fresh) it->second.since = now;
      it->second.fd = s.fd;
    }
    for (auto it = conns_.begin(); it != conns_.end();) {
      it = live.count(it->first) ? std::next(it) : conns_.erase(it);
    }
    // Too slow: still sending its request at the deadline.
    for (const auto& s : seen) {
      const Conn& c = conns_[s.key];
      if (!c.busy && now - c.since > limits_.request_deadline) cut[s.key] = {s.fd, "too slow"};
    }
    // Too many: the newest beyond the caps, per peer address and in all.
    std::vector<const Seen*> by_age;
    for (const auto& s : seen) by_age.push_back(&s);
    std::stable_sort(by_age.begin(), by_age.end(), [&](const Seen* a, const Seen* b) {
      mu_.AssertHeld();  // called by the sort, under the lock taken above
      return conns_[a->key].since < conns_[b->key].since;
    });
    std::map<std::string, int> per_peer;
    int total = 0;
    for (const Seen* s : by_age) {
      if (++per_peer[s->ip] > limits_.max_per_peer || ++total > limits_.max_connections) {
        cut.emplace(s->key, std::make_pair(s->fd, "too many connections"));
      }
    }
  }
  std::map<std::string, int> why_count;
  for (const auto& [key, what] : cut) {
    // The descriptor may have been closed and reused since the scan: cut it
    // only if it is still that very connection.
    std::string now_key, ip;
    if (!PeerOf(what.first, port_, &now_key, &ip) || now_key != key) continue;
    shutdown(what.first, SHUT_RDWR);
    ++cut_;
    ++why_count[what.second];
  }
  // One line per scan, not per connection: an attack must not flood the log.
  for (const auto& [why, n] : why_count) {
    spdlog::warn(
        "HTTP port {}: closed {} connection(s), {} (request deadline {} ms, at most {} "
        "per address, {} in all)",
        port_, n, why, limits_.request_deadline.count(), limits_.max_per_peer,
        limits_.max_connections);
  }
}

void CloseAfterAnswer(httplib::Response& res) { res.set_header("Connection", "close"); }

}  // namespace pgfleet::net
