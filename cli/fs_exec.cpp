// pgfleet fs | exec: looking inside a job, through the API of the host that
// runs (or ran) it, with a ticket from pgfleet.host_ticket (owners and
// operators only), or the cluster token when the database gives none.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <thread>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/queries.h"
#include "core/hostapi/hostapi.h"
#include "core/net/endpoint.h"
#include "core/net/http.h"
#include "core/net/ticket.h"

namespace pgfleet::cli {
namespace {

using nlohmann::json;

using hostapi::UrlEncode;

// Where to ask, and with what: the host's API and a ticket of `kind`, or the
// cluster token when the database gives no ticket.
struct HostRequest {
  net::Endpoint ep;
  httplib::Headers headers;
  std::string host;
  std::string api_url, token;  // to open more connections to the same host
};

HostRequest Prepare(Command& cmd, pqxx::connection& conn, int64_t job, int attempt,
                    const std::string& kind, int timeout_seconds) {
  std::string why;
  auto t = HostTicket(conn, job, kind, attempt, &why);
  HostRequest r;
  std::string token;
  if (t) {
    r.headers.emplace(net::kTicketHeader, t->ticket);
    r.host = t->host_id;
    if (t->api_url.empty()) throw std::runtime_error("host " + t->host_id + " has no API URL");
    r.ep = net::MakeEndpoint(t->api_url, "", timeout_seconds);
    r.api_url = t->api_url;
    return r;
  }
  // No ticket: the cluster token, if we hold it, reaches the job's host.
  token = cmd.TokenOrEmpty();
  std::optional<AttemptHost> where;
  if (!token.empty()) {
    pqxx::work tx(conn);
    auto job_now = GetJobProgress(tx, job);
    if (job_now && (attempt <= 0 || attempt == job_now->attempt) && !job_now->host_id.empty()) {
      where = AttemptHost{job_now->host_id, job_now->api_url};
    } else if (job_now && attempt > 0) {
      where = GetAttemptHost(tx, job, attempt);
    }
  }
  if (!where || where->api_url.empty()) {
    throw std::runtime_error(why.empty() ? "job " + std::to_string(job) + " has no host to ask"
                                         : why);
  }
  r.host = where->host_id;
  r.ep = net::MakeEndpoint(where->api_url, token, timeout_seconds);
  r.api_url = where->api_url;
  r.token = token;
  return r;
}

// The host's error answer in words.
std::string ErrorOf(const httplib::Result& res, const std::string& host) {
  if (!res) return "host " + host + " not reachable: " + httplib::to_string(res.error());
  try {
    return "host " + host + ": " + json::parse(res->body).value("error", res->body);
  } catch (const std::exception&) {
    return "host " + host + ": HTTP " + std::to_string(res->status);
  }
}

}  // namespace

int CmdFs(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  int attempt = 0;
  Command cmd("pgfleet fs JOB [PATH] [--attempt N]", kListing);
  cmd.Options()("attempt", po::value(&attempt), "attempt (default: the latest)");
  cmd.Positional("job", &pos);
  cmd.ReadsHostLogs();
  if (!cmd.Parse(args)) return kExitOk;
  if (pos.empty() || pos.size() > 2) throw UsageError("expected JOB and at most one PATH");
  if (attempt < 0) throw UsageError("--attempt must be > 0 (got " + std::to_string(attempt) + ")");
  int64_t id = ParseJobId(pos[0]);
  std::string path = pos.size() == 2 ? pos[1] : "/";
  auto conn = cmd.Connect();
  HostRequest r = Prepare(cmd, *conn, id, attempt, "fs", 30);
  std::string target = r.ep.prefix + hostapi::FsPath(id, path, attempt);
  // A file streams to stdout as it comes; a listing or an error is read whole.
  int status = 0;
  bool raw = false;
  std::string body;
  auto res = r.ep.client->Get(
      target.c_str(), r.headers,
      [&](const httplib::Response& head) {
        status = head.status;
        raw = status == 200 &&
              head.get_header_value("Content-Type").rfind("application/octet-stream", 0) == 0;
        return true;
      },
      [&](const char* data, size_t n) {
        if (raw) return std::fwrite(data, 1, n, stdout) == n;
        body.append(data, n);
        return true;
      });
  std::fflush(stdout);
  if (!res || status != 200) {
    if (res) res->body = body;
    std::cerr << "pgfleet fs: " << ErrorOf(res, r.host) << "\n";
    return kExitFailure;
  }
  if (raw) return kExitOk;
  json doc = json::parse(body);
  if (cmd.json()) {
    PrintJson(doc);
    return kExitOk;
  }
  if (doc.value("type", "") == "symlink") {
    std::cout << path << " -> " << doc.value("target", "?") << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& e : doc["entries"]) {
    table.push_back({e.value("type", ""), e.value("mode", ""),
                     e.contains("size") ? e["size"].dump() : "", e.value("modified", ""),
                     e.value("name", "")});
  }
  PrintTable({"TYPE", "MODE", "SIZE", "MODIFIED", "NAME"}, table);
  if (doc.value("truncated", false)) std::cerr << "pgfleet fs: listing cut at 10000 entries\n";
  return kExitOk;
}

namespace {

// The local terminal in raw mode while a remote one is attached (-t), put
// back as it was when this goes.
class RawTerminal {
 public:
  RawTerminal() {
    if (!isatty(0) || tcgetattr(0, &saved_) != 0) return;
    termios raw = saved_;
    cfmakeraw(&raw);
    active_ = tcsetattr(0, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(0, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

int g_winch_pipe[2] = {-1, -1};  // SIGWINCH -> the stdin thread

void OnWinch(int) {
  int saved = errno;
  ssize_t n = write(g_winch_pipe[1], "w", 1);
  (void)n;
  errno = saved;
}

// The size of the terminal on stdout (else stdin); false when neither is one.
bool LocalSize(int* rows, int* cols) {
  winsize ws{};
  for (int fd : {1, 0}) {
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
      *rows = ws.ws_row;
      *cols = ws.ws_col;
      return true;
    }
  }
  return false;
}

// Sends this process's stdin (when `forward_stdin`) and terminal resizes to
// an exec session, on a connection of its own, until the command ends.
class StdinSender {
 public:
  StdinSender(const HostRequest& r, int64_t job, std::string session, bool forward_stdin, bool tty)
      : ep_(net::MakeEndpoint(r.api_url, r.token, 10)),
        path_(ep_.prefix + hostapi::ExecStdinPath(job)),
        session_(std::move(session)),
        forward_stdin_(forward_stdin),
        tty_(tty) {
    thread_ = std::thread([this] { Run(); });
  }
  ~StdinSender() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  // POSTs body (and query); retries while the host says its buffer is full.
  bool Post(const std::string& query, const std::string& body) {
    httplib::Headers h = {{net::kExecSessionHeader, session_}};
    while (!done_) {
      auto res = ep_.client->Post(path_ + query, h, body, "application/octet-stream");
      if (res && res->status == 503) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      return res && res->status == 200;
    }
    return false;
  }

  void Run() {
    bool reading = forward_stdin_;
    while (!done_) {
      pollfd fds[2] = {{reading ? 0 : -1, POLLIN, 0}, {g_winch_pipe[0], POLLIN, 0}};
      if (poll(fds, 2, 100) <= 0) continue;
      if (fds[1].revents & POLLIN) {
        char drain[64];
        ssize_t n = read(g_winch_pipe[0], drain, sizeof drain);
        (void)n;
        int rows, cols;
        if (tty_ && LocalSize(&rows, &cols)) {
          Post("?rows=" + std::to_string(rows) + "&cols=" + std::to_string(cols), "");
        }
      }
      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[65536];
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n > 0) {
          if (!Post("", std::string(buf, static_cast<size_t>(n)))) return;
        } else {
          reading = false;  // end of our stdin: the command's ends too (a terminal has none)
          if (!tty_) Post("?eof=1", "");
        }
      }
    }
  }

  net::Endpoint ep_;
  std::string path_, session_;
  bool forward_stdin_, tty_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// The path and query of POST .../exec for the command and how to run it.
std::string ExecTarget(const HostRequest& r, int64_t id, int attempt, bool interactive, bool tty,
                       const std::vector<std::string>& command) {
  std::string target = r.ep.prefix + hostapi::ExecPath(id);
  if (attempt > 0) target += "attempt=" + std::to_string(attempt) + "&";
  if (interactive || tty) target += "stdin=stream&";
  int rows = 0, cols = 0;
  if (tty) {
    target += "tty=1&";
    if (LocalSize(&rows, &cols)) {
      target += "rows=" + std::to_string(rows) + "&cols=" + std::to_string(cols) + "&";
    }
  }
  for (size_t i = 0; i < command.size(); ++i) {
    target += (i ? "&" : "") + std::string("arg=") + UrlEncode(command[i]);
  }
  return target;
}

// Reads exec's answer as it arrives: "s <session>\n" (on_session is called),
// "o <n>\n" + n bytes (to stdout), "e <n>\n" + n bytes (to stderr),
// "x <code>\n" (the exit code, last).
class ExecFrames {
 public:
  explicit ExecFrames(std::function<void(const std::string&)> on_session)
      : on_session_(std::move(on_session)) {}

  bool Add(const char* data, size_t n) {
    pending_.append(data, n);
    while (true) {
      size_t nl = pending_.find('\n');
      if (nl == std::string::npos || nl < 2) return true;
      char kind = pending_[0];
      if (kind == 's') {
        on_session_(pending_.substr(2, nl - 2));
        pending_.erase(0, nl + 1);
        continue;
      }
      long long len = std::atoll(pending_.c_str() + 2);
      if (kind == 'x') {
        code_ = static_cast<int>(len);
        pending_.erase(0, nl + 1);
        continue;
      }
      if (pending_.size() < nl + 1 + static_cast<size_t>(len)) return true;
      FILE* to = kind == 'e' ? stderr : stdout;
      std::fwrite(pending_.data() + nl + 1, 1, static_cast<size_t>(len), to);
      std::fflush(to);
      pending_.erase(0, nl + 1 + static_cast<size_t>(len));
    }
  }
  int code() const { return code_; }  // -1 until the exit code came

 private:
  std::function<void(const std::string&)> on_session_;
  std::string pending_;
  int code_ = -1;
};

}  // namespace

int CmdExec(const std::vector<std::string>& all_args) {
  auto [args, command] = SplitAtDoubleDash(all_args);
  std::vector<std::string> pos;
  int attempt = 0;
  bool interactive = false, tty = false;
  Command cmd("pgfleet exec JOB [-i] [-t] -- CMD ARG...", kText);
  cmd.Options()("interactive,i", po::bool_switch(&interactive),
                "send this command's stdin to the command, as it comes")(
      "tty,t", po::bool_switch(&tty),
      "run the command on a terminal of its own, sized as this one (-it: an interactive "
      "shell; this terminal is in raw mode meanwhile)")("attempt", po::value(&attempt),
                                                        "attempt (default: the running one)");
  cmd.Positional("job", &pos);
  cmd.ReadsHostLogs();
  if (!cmd.Parse(args)) return kExitOk;
  if (pos.size() != 1) throw UsageError("expected exactly one JOB, then -- CMD ARG...");
  if (command.empty()) throw UsageError("expected the command after --: pgfleet exec JOB -- CMD");
  if (attempt < 0) throw UsageError("--attempt must be > 0 (got " + std::to_string(attempt) + ")");
  int64_t id = ParseJobId(pos[0]);
  auto conn = cmd.Connect();
  HostRequest r = Prepare(cmd, *conn, id, attempt, "exec", 10);
  // A command may be quiet for long: only a silent host for an hour ends it.
  r.ep.client->set_read_timeout(3600, 0);
  if (tty && pipe2(g_winch_pipe, O_CLOEXEC | O_NONBLOCK) == 0) signal(SIGWINCH, OnWinch);
  std::optional<RawTerminal> raw;
  if (tty && interactive) raw.emplace();
  std::unique_ptr<StdinSender> sender;
  ExecFrames frames([&](const std::string& session) {
    sender = std::make_unique<StdinSender>(r, id, session, interactive, tty);
  });
  std::string error_body;
  int status = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = ExecTarget(r, id, attempt, interactive, tty, command);
  req.headers = r.headers;
  req.set_header("Content-Type", "application/octet-stream");
  req.response_handler = [&](const httplib::Response& head) {
    status = head.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status == 200) return frames.Add(data, n);
    error_body.append(data, n);
    return true;
  };
  auto res = r.ep.client->send(req);
  sender.reset();
  raw.reset();
  if (!res || status != 200) {
    if (res) res->body = error_body;
    std::cerr << "pgfleet exec: " << ErrorOf(res, r.host) << "\n";
    return kExitFailure;
  }
  if (frames.code() < 0) {
    std::cerr << "pgfleet exec: host " << r.host
              << " ended the answer before the command's exit code\n";
    return kExitFailure;
  }
  return frames.code();
}

}  // namespace pgfleet::cli
