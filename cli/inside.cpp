// pgfleet fs | exec: looking inside a job, through the API of the host that
// runs (or ran) it, with a ticket from pgfleet.host_ticket (owners and
// operators only), or the cluster token when the database gives none.

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/queries.h"
#include "core/net/endpoint.h"
#include "core/net/http.h"
#include "core/net/ticket.h"

namespace pgfleet::cli {
namespace {

using nlohmann::json;

std::string UrlEncode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// Where to ask, and with what: the host's API and a ticket of `kind`, or the
// cluster token when the database gives no ticket.
struct HostRequest {
  net::Endpoint ep;
  httplib::Headers headers;
  std::string host;
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
  std::string target = r.ep.prefix + "/v1/jobs/" + std::to_string(id) +
                       "/fs?path=" + UrlEncode(path) +
                       (attempt > 0 ? "&attempt=" + std::to_string(attempt) : "");
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

int CmdExec(const std::vector<std::string>& all_args) {
  auto [args, command] = SplitAtDoubleDash(all_args);
  std::vector<std::string> pos;
  int attempt = 0;
  bool interactive = false, tty = false;
  Command cmd("pgfleet exec JOB [-i] -- CMD ARG...", kText);
  cmd.Options()("interactive,i", po::bool_switch(&interactive),
                "send this command's stdin to the command (up to 1 MiB, read to its end first)")(
      "tty,t", po::bool_switch(&tty), "a terminal: not supported yet (see the error)")(
      "attempt", po::value(&attempt), "attempt (default: the running one)");
  cmd.Positional("job", &pos);
  cmd.ReadsHostLogs();
  if (!cmd.Parse(args)) return kExitOk;
  if (pos.size() != 1) throw UsageError("expected exactly one JOB, then -- CMD ARG...");
  if (command.empty()) throw UsageError("expected the command after --: pgfleet exec JOB -- CMD");
  if (tty) {
    throw UsageError(
        "-t: a terminal needs a two-way stream the host API does not carry yet; run the command "
        "without -t (with -i to send stdin)");
  }
  if (attempt < 0) throw UsageError("--attempt must be > 0 (got " + std::to_string(attempt) + ")");
  int64_t id = ParseJobId(pos[0]);
  std::string input;
  if (interactive) {
    input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (input.size() > net::kMaxBodyBytes) {
      throw UsageError("-i: stdin is over 1 MiB; exec takes at most 1 MiB of input");
    }
  }
  auto conn = cmd.Connect();
  HostRequest r = Prepare(cmd, *conn, id, attempt, "exec", 10);
  // A command may be quiet for long: only a silent host for an hour ends it.
  r.ep.client->set_read_timeout(3600, 0);
  std::string target = r.ep.prefix + "/v1/jobs/" + std::to_string(id) + "/exec?";
  if (attempt > 0) target += "attempt=" + std::to_string(attempt) + "&";
  for (size_t i = 0; i < command.size(); ++i) {
    target += (i ? "&" : "") + std::string("arg=") + UrlEncode(command[i]);
  }
  // Frames: "o <n>\n" n bytes | "e <n>\n" n bytes | "x <code>\n".
  std::string pending, error_body;
  int status = 0, code = -1;
  auto consume = [&]() {
    while (true) {
      size_t nl = pending.find('\n');
      if (nl == std::string::npos || nl < 2) return true;
      char kind = pending[0];
      long long n = std::atoll(pending.c_str() + 2);
      if (kind == 'x') {
        code = static_cast<int>(n);
        pending.erase(0, nl + 1);
        continue;
      }
      if (pending.size() < nl + 1 + static_cast<size_t>(n)) return true;
      FILE* to = kind == 'e' ? stderr : stdout;
      std::fwrite(pending.data() + nl + 1, 1, static_cast<size_t>(n), to);
      std::fflush(to);
      pending.erase(0, nl + 1 + static_cast<size_t>(n));
    }
  };
  httplib::Request req;
  req.method = "POST";
  req.path = target;
  req.headers = r.headers;
  req.body = input;
  req.set_header("Content-Type", "application/octet-stream");
  req.response_handler = [&](const httplib::Response& head) {
    status = head.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, n);
      return true;
    }
    pending.append(data, n);
    return consume();
  };
  auto res = r.ep.client->send(req);
  if (!res || status != 200) {
    if (res) res->body = error_body;
    std::cerr << "pgfleet exec: " << ErrorOf(res, r.host) << "\n";
    return kExitFailure;
  }
  if (code < 0) {
    std::cerr << "pgfleet exec: host " << r.host
              << " ended the answer before the command's exit code\n";
    return kExitFailure;
  }
  return code;
}

}  // namespace pgfleet::cli
