#include "cli/host_logs.h"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/hostapi/hostapi.h"
#include "core/net/endpoint.h"
#include "core/net/http.h"
#include "core/net/ticket.h"

namespace pgfleet::cli {

namespace {

// How long one read may wait for the host: a quiet job sends nothing, so a
// follow reconnects (from the last byte) after this. PGFLEET_LOG_READ_TIMEOUT
// (seconds) overrides it, e.g. for slow links, or tests.
int ReadTimeoutSeconds() {
  if (const char* v = std::getenv("PGFLEET_LOG_READ_TIMEOUT")) {
    int s = std::atoi(v);
    if (s > 0) return s;
  }
  return 30;
}

// A follow gives up when the host has not answered at all for this long.
constexpr auto kGiveUpAfter = std::chrono::seconds(60);

// How one request authenticates: a ticket first (it is taken once: every
// (re)connection asks for a new one); the cluster token only when the
// database gives none. False, with *refused set, when there is neither.
bool Credentials(const LogAccess& access, httplib::Headers* headers, std::string* token,
                 std::string* refused) {
  std::string why;
  std::string ticket = access.ticket ? access.ticket(&why) : std::string();
  if (!ticket.empty()) {
    headers->emplace(net::kTicketHeader, ticket);
  } else if (!access.token.empty()) {
    *token = access.token;
  } else {
    *refused = why.empty() ? "no log ticket and no cluster token" : why;
    return false;
  }
  return true;
}

// One answer of GET .../logs, copied to stdout as it arrives.
struct LogAnswer {
  LogAnswer(LogStream* o, uint64_t* n, std::chrono::steady_clock::time_point* last)
      : out(o), next(n), last_answer(last) {}

  LogStream* out;
  uint64_t* next;  // position in the whole output after the last byte copied
  std::chrono::steady_clock::time_point* last_answer;
  int status = 0;
  std::string refused_body;  // the host's {"error": ...}
  bool stdout_closed = false;

  bool Head(const httplib::Response& r) {
    status = r.status;
    *last_answer = std::chrono::steady_clock::now();
    // Where this answer starts in the whole output (a tail, or output
    // rotated away, starts past 0).
    if (r.has_header("X-Log-Offset")) {
      try {
        *next = std::stoull(r.get_header_value("X-Log-Offset"));
      } catch (const std::exception&) {
      }
    }
    return true;
  }
  bool Data(const char* data, size_t len) {
    if (status != 200) {
      if (refused_body.size() < 4096) refused_body.append(data, len);
      return true;
    }
    std::cout.write(data, static_cast<std::streamsize>(len));
    std::cout.flush();
    if (!std::cout) {  // the reader went away (e.g. `| head`): stop here
      stdout_closed = true;
      return false;
    }
    out->bytes += len;
    *next += len;
    *last_answer = std::chrono::steady_clock::now();
    return true;
  }
  // The host's reason for refusing, from its {"error": ...} when it gave one.
  std::string Refusal() const {
    try {
      return nlohmann::json::parse(refused_body).at("error").get<std::string>();
    } catch (const std::exception&) {
      return "HTTP " + std::to_string(status);
    }
  }
};

}  // namespace

LogStream StreamHostLogs(const std::string& api_url, const LogAccess& access, int64_t job,
                         int attempt, bool follow, int tail) {
  LogStream out;
  if ((access.token.empty() && !access.ticket) || api_url.empty()) return out;
  auto last_answer = std::chrono::steady_clock::now();
  uint64_t next = 0;
  while (true) {
    LogAnswer answer(&out, &next, &last_answer);
    try {
      httplib::Headers headers;
      std::string token;
      if (!Credentials(access, &headers, &token, &out.refused)) return out;
      auto ep = net::MakeEndpoint(api_url, token, 5);
      ep.client->set_read_timeout(ReadTimeoutSeconds(), 0);
      std::string path = ep.prefix + hostapi::LogsPath(job, attempt);
      if (follow) path += "&follow=1";
      if (out.bytes > 0) {
        path += "&offset=" + std::to_string(next);  // resume after what we have
      } else if (tail >= 0) {
        path += "&tail=" + std::to_string(tail);
      }
      auto res = ep.client->Get(
          path.c_str(), headers, [&](const httplib::Response& r) { return answer.Head(r); },
          [&](const char* data, size_t len) { return answer.Data(data, len); });
      if ((res && answer.status == 200) || answer.stdout_closed) {
        out.ended = true;
        return out;
      }
    } catch (const std::exception&) {
    }
    // Refused (no such attempt here, collected, unauthorized), or not following: done.
    if (answer.status != 0 && answer.status != 200) {
      out.refused = answer.Refusal();
      return out;
    }
    if (!follow) return out;
    if (std::chrono::steady_clock::now() - last_answer > kGiveUpAfter) return out;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace pgfleet::cli
