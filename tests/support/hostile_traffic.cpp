#include "hostile_traffic.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <regex>

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

bool SendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads what the server sends until it closes, is quiet for 100 ms after
// answering (keep-alive), 3 s pass without an answer, or 64 KiB.
std::string Drain(int fd) {
  std::string out;
  char buf[4096];
  for (int wait_ms = 3000; out.size() < 65536; wait_ms = 100) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0) break;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Sends a whole request on a new connection and reads the answer. (No
// half-close: httplib drops a request whose sender shut down its side.)
void OneShot(int port, const std::string& request) {
  int fd = ConnectLoopback(port);
  if (fd < 0) return;
  if (SendAll(fd, request)) Drain(fd);
  close(fd);
}

std::string Post(const std::string& path, const std::string& body, const std::string& token,
                 const std::string& extra_headers = "") {
  std::string auth = token.empty() ? "" : "Authorization: Bearer " + token + "\r\n";
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + extra_headers +
         "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

// A slow sender: the request line, then one header line every 2 s, never
// the blank line that ends the headers.
struct Slow {
  int fd = -1;
  Clock::time_point next, give_up;
};

}  // namespace

int ConnectLoopback(int port, int timeout_seconds) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{timeout_seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int PortOf(const std::string& url) {
  std::smatch m;
  if (!std::regex_match(url, m, std::regex(R"(http://127\.0\.0\.1:([0-9]+).*)"))) return 0;
  return std::stoi(m[1]);
}

HostileTraffic::HostileTraffic(std::function<std::vector<HostileTarget>()> targets,
                               std::string token)
    : targets_(std::move(targets)), token_(std::move(token)) {
  threads_.emplace_back([this] { Run(); });
  // Slow senders, 32 at a time (more than hostd has threads), on their own thread.
  threads_.emplace_back([this] {
    std::mt19937 rng(7);
    std::vector<Slow> slow;
    while (!stop_) {
      auto now = Clock::now();
      auto targets = targets_();
      while (slow.size() < 32 && !targets.empty()) {
        const auto& t = targets[rng() % targets.size()];
        Slow s;
        s.fd = ConnectLoopback(t.port);
        if (s.fd < 0) break;
        ++sent_;
        SendAll(s.fd, "POST " + t.prefix + "/v1/jobs HTTP/1.1\r\n");
        s.next = now + 2s;
        s.give_up = now + 20s;  // past hostd's request deadline (10 s)
        slow.push_back(s);
      }
      for (auto it = slow.begin(); it != slow.end();) {
        bool done = false;
        if (now >= it->next) {
          pollfd p{it->fd, POLLIN, 0};
          char c;
          // The server closed it (the deadline), or a send fails: cut.
          bool closed = poll(&p, 1, 0) > 0 && recv(it->fd, &c, 1, MSG_DONTWAIT) <= 0;
          if (closed || !SendAll(it->fd, "X-Slow: " + std::to_string(rng()) + "\r\n")) {
            ++slow_cut_;
            done = true;
          }
          it->next = now + 2s;
        }
        if (now >= it->give_up) done = true;
        if (done) {
          close(it->fd);
          it = slow.erase(it);
        } else {
          ++it;
        }
      }
      std::this_thread::sleep_for(100ms);
    }
    for (auto& s : slow) close(s.fd);
  });
}

HostileTraffic::~HostileTraffic() { Stop(); }

void HostileTraffic::Stop() {
  stop_ = true;
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void HostileTraffic::Run() {
  std::mt19937 rng(11);
  while (!stop_) {
    auto targets = targets_();
    if (!targets.empty()) Round(targets[rng() % targets.size()]);
    std::this_thread::sleep_for(50ms);
  }
}

void HostileTraffic::Round(const HostileTarget& t) {
  const std::string jobs = t.prefix + "/v1/jobs";
  // Garbage instead of HTTP.
  OneShot(t.port, std::string("\x16\x03\x01\x02\x00garbage\r\n\r\n", 17));
  // A body far over the limit, with and without the token.
  std::string big(2 << 20, 'x');
  OneShot(t.port, Post(jobs, big, ""));
  OneShot(t.port, Post(jobs, big, token_));
  // Deeply nested JSON, with the token.
  std::string nested = std::string(100000, '[') + std::string(100000, ']');
  OneShot(t.port, Post(jobs, nested, token_));
  OneShot(t.port,
          Post(jobs, "{\"jobs\":[{\"job\":1,\"attempt\":1,\"spec\":" + nested + "}]}", token_));
  // Unauthorized, with a body, then a request on the same connection.
  OneShot(t.port, Post(jobs, "{\"jobs\":[]}", "wrong-token") + "GET " + t.prefix +
                      "/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  // A dispatch with a forged ticket (signed with no host's key).
  OneShot(t.port, Post(jobs,
                       "{\"jobs\":[{\"job\":1,\"attempt\":1,\"spec\":{\"command\":[\"true\"]},"
                       "\"ticket\":\"v1:dispatch:h1:1:1:1:9999999999:0123456789abcdef:" +
                           std::string(64, '0') + "\"}]}",
                       token_));
  // Stops and logs of attempts nobody has; ids out of range.
  OneShot(t.port, Post(jobs + "/987654321/stop?attempt=1", "", token_));
  OneShot(t.port, "GET " + jobs + "/99999999999999999999999/logs?tail=1 HTTP/1.1\r\nHost: x\r\n" +
                      "Authorization: Bearer " + token_ + "\r\n\r\n");
  // No Content-Length; a lying Content-Length (closed early).
  OneShot(t.port, "POST " + jobs + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token_ +
                      "\r\n\r\n{}");
  OneShot(t.port, "POST " + jobs + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token_ +
                      "\r\nContent-Length: 99999\r\n\r\n{\"jobs\":");
  sent_ += 11;
}

}  // namespace pgfleet::testing
