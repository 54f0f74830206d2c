// libFuzzer target: hostd's HTTP API, in process, over loopback: the real
// routes (InstallApi) in front of a real Supervisor with the sim driver (no
// processes) and an Agent that never reaches a database. The first byte of
// the input picks what the rest is:
//   a multiple of 8: a whole raw request (request line, headers, body);
//   else odd: the body of an authorized POST /v1/jobs;
//   else: the path and query after /v1/jobs/ of an authorized GET or POST.
// A crash, a hang or a sanitizer report in any handler is a finding; so is a
// request that gets no answer at all while the server is up.

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "core/metrics/metrics.h"
#include "core/net/http.h"
#include "hostd/agent/agent.h"
#include "hostd/api/api.h"
#include "hostd/attempt_runners.h"
#include "hostd/hollow/sim.h"
#include "hostd/supervisor/supervisor.h"

namespace {

constexpr const char* kToken = "fuzz-token";

struct Host {
  pgfleet::metrics::Registry metrics;
  std::unique_ptr<pgfleet::hostd::Agent> agent;
  std::unique_ptr<pgfleet::hostd::Supervisor> supervisor;
  httplib::Server server;
  std::thread thread;
  int port = -1;

  Host() {
    pgfleet::hostd::HostConfig config;
    config.id = "fuzz";
    config.dsn = "host=/nonexistent";  // never used: Run is not called
    config.driver = pgfleet::hostd::kSimDriver;
    // Tickets are checked (parsed, HMAC compared) like on a real host; the
    // fuzzer cannot sign one, so starts and stops end at that check.
    config.ticket_key = std::string(64, 'a');
    agent = std::make_unique<pgfleet::hostd::Agent>(config, metrics);
    pgfleet::hostd::SupervisorOptions o;
    o.host_id = "fuzz";
    o.driver = pgfleet::hostd::kSimDriver;
    o.keep_finished = std::chrono::milliseconds(0);  // memory stays flat
    supervisor = std::make_unique<pgfleet::hostd::Supervisor>(
        o, [this](pgfleet::model::Report r) { agent->Enqueue(std::move(r)); },
        pgfleet::hostd::MakeAttemptRunner(o));
    agent->SetSupervisor(supervisor.get());
    pgfleet::net::PrepareServer(server);
    pgfleet::hostd::InstallApi(server, *supervisor, *agent, kToken, metrics);
    port = server.bind_to_any_port("127.0.0.1");
    if (port < 0) std::abort();
    thread = std::thread([this] { server.listen_after_bind(); });
    while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

Host& TheHost() {
  static Host* host = new Host();  // lives for the whole run
  return *host;
}

// Sends the request and reads the answer; false if none came within
// first_wait_ms.
bool Exchange(int port, const std::string& request, int first_wait_ms) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) std::abort();
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Every call below is retried on EINTR: libFuzzer's -timeout arms a
  // SIGALRM that fires every few seconds, and an interrupted wait is not a
  // server that did not answer (CI once failed that way).
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) std::abort();
  size_t off = 0;
  while (off < request.size()) {
    ssize_t n = send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server may refuse early (too large, unauthorized)
    off += static_cast<size_t>(n);
  }
  // No half-close: httplib drops a request whose sender has shut down its
  // side before the answer is written. Wait for the answer to start, then
  // read until the server closes or is quiet for 50 ms (a raw request may
  // ask for keep-alive).
  std::string answer;
  char buf[4096];
  for (int wait_ms = first_wait_ms;; wait_ms = 50) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    pollfd p{fd, POLLIN, 0};
    int ready;
    do {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      ready = poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    } while (ready < 0 && errno == EINTR);
    if (ready <= 0) break;
    ssize_t n;
    do {
      n = recv(fd, buf, sizeof(buf), 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (std::getenv("HOST_API_FUZZ_VERBOSE")) std::fprintf(stderr, "%s\n", answer.c_str());
  return !answer.empty() || off < request.size();
}

std::string Authorized(const std::string& method, const std::string& target,
                       const std::string& body) {
  return method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + kToken +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Host& host = TheHost();
  std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string request;
  // Mostly authorized requests, which reach our handlers; some raw ones.
  const bool raw = data[0] % 8 == 0;
  if (raw) {
    request = rest;
  } else if (data[0] % 2) {
    request = Authorized("POST", "/v1/jobs", rest);
  } else {
    // Only bytes a request target may hold; others are the raw case's.
    for (char& c : rest) {
      if (c <= ' ' || c == 127) c = '_';
    }
    request = Authorized(rest.size() % 2 ? "POST" : "GET", "/v1/jobs/" + rest, "");
  }
  // A well-formed request always gets an answer, and soon; a raw one may be
  // incomplete, so the server rightly waits for more.
  if (!Exchange(host.port, request, raw ? 200 : 10000) && !raw) {
    // A hang: leave every thread's stack beside the finding, then fail.
    if (const char* dump = std::getenv("HOST_API_FUZZ_STALL_DUMP")) {
      std::string cmd = "gdb -p " + std::to_string(getpid()) +
                        " -batch -ex 'thread apply all bt' > " + dump + " 2>&1";
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "no stack dump (%s)\n", cmd.c_str());
    }
    std::abort();
  }
  return 0;
}
