// HTTP GET and TCP connect checks (health_prober.h), from the job's network
// namespace: the calling thread joins it, so callers run each on a thread
// of its own that ends with the check (HealthMonitor does).

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "hostd/health/health_prober.h"

namespace pgfleet::hostd::health {

namespace {

using Clock = std::chrono::steady_clock;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

int MillisLeft(Clock::time_point deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// Joins the network namespace of `pid` if it is not hostd's. "" when done
// (or not needed), else why not.
std::string JoinNetwork(pid_t pid) {
  if (pid <= 0) return "";
  const std::string path = "/proc/" + std::to_string(pid) + "/ns/net";
  Fd ns{open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (ns.fd < 0) return "the job's process is gone";
  struct stat theirs {
  }, ours{};
  if (fstat(ns.fd, &theirs) != 0 || stat("/proc/self/ns/net", &ours) != 0) {
    return std::string("stat of a network namespace: ") + std::strerror(errno);
  }
  if (theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev) return "";
  if (setns(ns.fd, CLONE_NEWNET) != 0) {
    return std::string("joining the job's network namespace: ") + std::strerror(errno);
  }
  return "";
}

// A connected socket to 127.0.0.1:port by the deadline, or -1 with *why.
int Connect(int port, Clock::time_point deadline, std::string* why) {
  const std::string where = "127.0.0.1:" + std::to_string(port);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd pfd{fd, POLLOUT, 0};
    rc = poll(&pfd, 1, MillisLeft(deadline));
    if (rc == 0) {
      close(fd);
      *why = "connect " + where + ": timed out";
      return -1;
    }
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    errno = err;
    rc = err == 0 ? 0 : -1;
  }
  if (rc != 0) {
    *why = "connect " + where + ": " + std::strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

// Sends a GET of `path` and reads the answer's first bytes by the deadline.
ProbeResult HttpGet(int fd, const model::HealthCheck& check, Clock::time_point deadline) {
  const std::string request = "GET " + check.path +
                              " HTTP/1.0\r\nHost: localhost\r\nUser-Agent: pgfleet-health\r\n"
                              "Connection: close\r\n\r\n";
  size_t sent = 0;
  while (sent < request.size()) {
    pollfd pfd{fd, POLLOUT, 0};
    if (poll(&pfd, 1, MillisLeft(deadline)) <= 0)
      return {false, "GET " + check.path + ": timed out"};
    ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return {false, "GET " + check.path + ": " + std::strerror(errno)};
    }
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string answer;
  char buf[2048];
  while (answer.size() < model::kMaxHealthOutputBytes) {
    pollfd pfd{fd, POLLIN, 0};
    int ready = poll(&pfd, 1, MillisLeft(deadline));
    if (ready <= 0) {
      if (answer.find("\r\n") != std::string::npos) break;  // the status line came
      return {false, BoundOutput("GET " + check.path + ": timed out" +
                                 (answer.empty() ? "" : " after " + answer))};
    }
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      break;
    }
    answer.append(buf, static_cast<size_t>(n));
  }
  // "HTTP/1.1 200 OK"
  int status = 0;
  if (answer.rfind("HTTP/", 0) == 0) {
    size_t sp = answer.find(' ');
    if (sp != std::string::npos && sp + 4 <= answer.size()) {
      const std::string code = answer.substr(sp + 1, 3);
      if (code.find_first_not_of("0123456789") == std::string::npos) status = std::stoi(code);
    }
  }
  if (status == 0) {
    return {false, BoundOutput("GET " + check.path + ": not an HTTP answer: " + answer)};
  }
  ProbeResult r;
  r.passed = status >= 200 && status < 400;
  r.output = BoundOutput("GET " + check.path + ": " + answer);
  return r;
}

}  // namespace

ProbeResult ProbeNetwork(const model::HealthCheck& check, pid_t pid) {
  const auto deadline = Clock::now() + std::chrono::seconds(check.timeout_seconds);
  if (std::string why = JoinNetwork(pid); !why.empty()) return {false, why};
  std::string why;
  Fd fd{Connect(check.port, deadline, &why)};
  if (fd.fd < 0) return {false, BoundOutput(why)};
  if (check.type == model::HealthCheckType::kTcp) {
    return {true, "connected to 127.0.0.1:" + std::to_string(check.port)};
  }
  return HttpGet(fd.fd, check, deadline);
}

}  // namespace pgfleet::hostd::health
