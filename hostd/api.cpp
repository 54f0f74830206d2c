#include "hostd/api.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <thread>

#include "core/model/job_spec.h"
#include "core/model/json_limits.h"

namespace pgfleet::hostd {
namespace {

using nlohmann::json;

// Starts of one dispatched batch run this many at a time.
constexpr size_t kParallelStarts = 4;

struct StartItem {
  int64_t job = 0;
  int attempt = 0;
  model::JobSpec spec;
  std::string refused;  // why its spec is refused; empty = it is fine
};

// Parses the whole batch first. A batch that is not one (not JSON, no jobs
// array, an item without a job id or attempt) starts nothing: throws
// SpecError. A bad spec refuses only its own item: one job's spec must never
// cost the batch's other jobs their start.
std::vector<StartItem> ParseStartBatch(const std::string& body) {
  json j;
  try {
    j = model::ParseBoundedJson(body, "body");
  } catch (const model::JsonError& e) {
    throw model::SpecError("body", e.what());
  }
  if (!j.is_object() || !j.contains("jobs") || !j["jobs"].is_array()) {
    throw model::SpecError("jobs", "body must be an object with a \"jobs\" array");
  }
  std::vector<StartItem> items;
  size_t i = 0;
  for (const auto& e : j["jobs"]) {
    std::string at = "jobs[" + std::to_string(i++) + "]";
    if (!e.is_object()) throw model::SpecError(at, at + " must be an object");
    if (!e.contains("job") || !e["job"].is_number_integer() || e["job"].get<int64_t>() <= 0) {
      throw model::SpecError(at + ".job", at + ".job must be an integer > 0");
    }
    if (!e.contains("attempt") || !e["attempt"].is_number_integer() ||
        e["attempt"].get<int64_t>() <= 0 || e["attempt"].get<int64_t>() > INT32_MAX) {
      throw model::SpecError(at + ".attempt", at + ".attempt must be an integer > 0");
    }
    if (!e.contains("spec")) throw model::SpecError(at + ".spec", at + ".spec is required");
    StartItem item;
    item.job = e["job"].get<int64_t>();
    item.attempt = e["attempt"].get<int>();
    try {
      item.spec = model::ParseJobSpec(e["spec"]);
    } catch (const model::SpecError& err) {
      item.refused = std::string("invalid job spec: ") + err.what();
    }
    items.push_back(std::move(item));
  }
  return items;
}

// The job id of a route: its last capture (hollow hosts' routes capture the host first).
std::string JobIdArg(const httplib::Request& req) { return req.matches[req.matches.size() - 1]; }

// A job id as POST /v1/jobs takes it: any positive 64-bit integer.
bool ParseId(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  try {
    *out = std::stoll(s);
  } catch (const std::out_of_range&) {
    return false;
  }
  return *out > 0;
}

// Query parameter as a non-negative int; -1 when absent; throws SpecError when malformed.
int IntParam(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return -1;
  std::string v = req.get_param_value(name);
  int64_t n = 0;
  if (v == "0") return 0;
  if (!ParseId(v, &n) || n > INT32_MAX) {
    throw model::SpecError(
        name, std::string(name) + " must be a non-negative integer (got \"" + v + "\")");
  }
  return static_cast<int>(n);
}

// What the route handlers share. The references outlive the server.
struct Api {
  Supervisor& supervisor;
  Agent& agent;
  metrics::Registry& metrics;
  net::ConnectionGuard* guard;  // may be null
};

void SendJson(httplib::Response& res, const json& body) {
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

const char* StartStatus(Supervisor::StartResult r) {
  switch (r) {
    case Supervisor::StartResult::kStarted:
      return "started";
    case Supervisor::StartResult::kAlready:
      return "already";
    case Supervisor::StartResult::kFailed:
      return "failed";
    case Supervisor::StartResult::kPreviousLife:
      return "previous_life";
  }
  return "failed";
}

json StartOne(const Api& api, const StartItem& item) {
  if (!item.refused.empty()) {
    // Refused on its own: it fails (start_failed) and the others start.
    api.metrics.Add("pgfleet_host_jobs_refused_total", 1);
    api.agent.Enqueue(model::Report::StartFailed(item.job, item.attempt, item.refused));
    return {{"job", item.job},
            {"attempt", item.attempt},
            {"status", "failed"},
            {"error", item.refused}};
  }
  std::string err;
  auto r = api.supervisor.Start(item.job, item.attempt, item.spec, &err);
  if (r == Supervisor::StartResult::kPreviousLife) {
    api.agent.Enqueue(model::Report::Lost(item.job, item.attempt, kNoTraceOfAttempt));
  }
  return {{"job", item.job}, {"attempt", item.attempt}, {"status", StartStatus(r)}, {"error", err}};
}

// POST /v1/jobs
void HandleStartJobs(const Api& api, const httplib::Request& req, httplib::Response& res) {
  std::vector<StartItem> items;
  try {
    items = ParseStartBatch(req.body);
  } catch (const model::SpecError& e) {
    api.metrics.Add("pgfleet_host_api_bad_requests_total", 1);
    net::ErrorResponse(res, 400, e.what());
    return;
  }
  // Each start waits for its shim's answer (a few ms, mostly the kernel
  // setting up the job), so a batch is started a few at a time (sim starts
  // take microseconds: one at a time).
  std::vector<json> results(items.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < items.size();) results[i] = StartOne(api, items[i]);
  };
  std::vector<std::thread> helpers;
  size_t workers = api.supervisor.RunsProcesses() ? kParallelStarts : 1;
  for (size_t w = 1; w < std::min(items.size(), workers); ++w) helpers.emplace_back(work);
  work();
  for (auto& t : helpers) t.join();
  api.metrics.Add("pgfleet_host_jobs_dispatched_total", static_cast<double>(items.size()));
  res.set_content(json{{"results", json(results)}}.dump(), "application/json");
}

// GET /v1/jobs
void HandleListJobs(const Api& api, const httplib::Request&, httplib::Response& res) {
  json out = json::array();
  for (const auto& info : api.supervisor.List()) out.push_back(info.ToJson());
  SendJson(res, json{{"jobs", out}});
}

// GET /v1/jobs/{id}
void HandleGetJob(const Api& api, const httplib::Request& req, httplib::Response& res) {
  int64_t id;
  if (!ParseId(JobIdArg(req), &id)) {
    return net::ErrorResponse(res, 400, "job id must be a positive integer");
  }
  auto info = api.supervisor.Latest(id);
  if (!info) {
    return net::ErrorResponse(res, 404, "job " + std::to_string(id) + " is not known to this host");
  }
  SendJson(res, info->ToJson());
}

// POST /v1/jobs/{id}/stop
void HandleStopJob(const Api& api, const httplib::Request& req, httplib::Response& res) {
  int64_t id;
  if (!ParseId(JobIdArg(req), &id)) {
    return net::ErrorResponse(res, 400, "job id must be a positive integer");
  }
  int attempt;
  try {
    attempt = IntParam(req, "attempt");
  } catch (const model::SpecError& e) {
    return net::ErrorResponse(res, 400, e.what());
  }
  if (!api.supervisor.Stop(id, attempt < 0 ? 0 : attempt)) {
    return net::ErrorResponse(res, 404, "job " + std::to_string(id) + " is not known to this host");
  }
  res.set_content(json{{"job", id}, {"status", "stopping"}}.dump(), "application/json");
}

// Logs are read and sent 64 KiB at a time, from a file that may be many
// GB: memory per request stays bounded whatever the log's size.
constexpr size_t kLogChunk = 64 * 1024;
// tail=N: at most this many lines, found within this many bytes from the end.
constexpr int kMaxTailLines = 100000;
constexpr uint64_t kMaxTailScan = 64ull << 20;

// Where the last `lines` lines of the first `size` bytes of the file begin (a
// final newline ends the last line rather than starting another). Reads
// backwards a chunk at a time; gives up kMaxTailScan bytes before the end
// (lines that long are cut there).
uint64_t TailOffset(const std::string& path, uint64_t size, int lines) {
  if (lines == 0) return size;
  std::ifstream f(path, std::ios::binary);
  const uint64_t floor = size > kMaxTailScan ? size - kMaxTailScan : 0;
  uint64_t end = size;
  int seen = 0;
  bool last_byte = true;  // the file's final byte: a newline there ends, not starts, a line
  std::string chunk;
  while (end > floor && f) {
    uint64_t begin = end > floor + kLogChunk ? end - kLogChunk : floor;
    chunk.resize(static_cast<size_t>(end - begin));
    f.seekg(static_cast<std::streamoff>(begin));
    f.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (f.gcount() != static_cast<std::streamsize>(chunk.size())) break;
    for (size_t i = chunk.size(); i-- > 0;) {
      if (chunk[i] == '\n' && !last_byte && ++seen == lines) return begin + i + 1;
      last_byte = false;
    }
    end = begin;
  }
  return floor;
}

// Streams the attempt's log from `offset`: up to `end` (the size it had when
// asked), or with `follow`, on as it grows until the attempt has ended and
// everything is sent (or the client goes away).
void StreamLog(const Api& api, const httplib::Request& req, httplib::Response& res, int64_t id,
               int attempt, std::string path, uint64_t offset, uint64_t end, bool follow) {
  auto pos = std::make_shared<uint64_t>(offset);
  Supervisor& supervisor = api.supervisor;
  // A long stream is an answer in progress, not a slow request.
  std::function<void()> touch = api.guard ? api.guard->Toucher(req) : [] {};
  res.set_chunked_content_provider("text/plain", [&supervisor, id, attempt, path, pos, end, follow,
                                                  touch](size_t, httplib::DataSink& sink) {
    touch();
    for (int waited = 0; waited < 50; ++waited) {
      bool live = follow && supervisor.Live(id, attempt);
      uint64_t want = follow ? kLogChunk : std::min<uint64_t>(kLogChunk, end - *pos);
      std::string chunk(static_cast<size_t>(want), '\0');
      std::ifstream f(path, std::ios::binary);
      f.seekg(static_cast<std::streamoff>(*pos));
      f.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      chunk.resize(static_cast<size_t>(std::max<std::streamsize>(f.gcount(), 0)));
      if (!chunk.empty()) {
        *pos += chunk.size();
        return sink.write(chunk.data(), chunk.size());
      }
      if (!live) {
        sink.done();
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return sink.is_writable();
  });
}

// GET /v1/jobs/{id}/logs
void HandleLogs(const Api& api, const httplib::Request& req, httplib::Response& res) {
  int64_t id;
  if (!ParseId(JobIdArg(req), &id)) {
    return net::ErrorResponse(res, 400, "job id must be a positive integer");
  }
  int attempt, tail, follow;
  int64_t offset = -1;
  try {
    attempt = IntParam(req, "attempt");
    tail = IntParam(req, "tail");
    follow = IntParam(req, "follow");
    if (req.has_param("offset")) {
      // Resuming a stream that broke off: the bytes the client already has.
      const std::string v = req.get_param_value("offset");
      if (v == "0") {
        offset = 0;
      } else if (!ParseId(v, &offset)) {
        throw model::SpecError(
            "offset", "offset must be a non-negative integer, in bytes (got \"" + v + "\")");
      }
      if (tail >= 0) throw model::SpecError("offset", "offset and tail exclude each other");
    }
    if (tail > kMaxTailLines) {
      throw model::SpecError("tail", "tail must be at most " + std::to_string(kMaxTailLines) +
                                         " lines (got " + std::to_string(tail) + ")");
    }
  } catch (const model::SpecError& e) {
    return net::ErrorResponse(res, 400, e.what());
  }
  std::string path = api.supervisor.LogPath(id, attempt < 0 ? 0 : attempt);
  if (path.empty() && !api.supervisor.RunsProcesses()) {
    return net::ErrorResponse(res, 404,
                              "no logs for job " + std::to_string(id) +
                                  ": this host is simulated (driver sim), its jobs run no process");
  }
  if (path.empty()) {
    return net::ErrorResponse(res, 404, "no logs for job " + std::to_string(id) + " on this host");
  }
  if (attempt <= 0) {
    // attempt from the directory name <job>-<attempt>/output.log
    std::string dir = path.substr(0, path.rfind('/'));
    attempt = std::stoi(dir.substr(dir.rfind('-') + 1));
  }
  struct stat st {};
  uint64_t size = stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  uint64_t start = offset >= 0 ? std::min<uint64_t>(static_cast<uint64_t>(offset), size)
                   : tail < 0  ? 0
                               : TailOffset(path, size, tail);
  StreamLog(api, req, res, id, attempt, path, start, size, follow > 0);
}

// Every request under `guarded` (/v1/, or /hosts/ for hollow hosts) needs the cluster token.
httplib::Server::HandlerResponse CheckToken(const std::string& guarded, const std::string& token,
                                            metrics::Registry& metrics, const httplib::Request& req,
                                            httplib::Response& res) {
  if (req.path.rfind(guarded, 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
  if (!net::Authorized(req, token)) {
    metrics.Add("pgfleet_host_api_unauthorized_total", 1);
    net::ErrorResponse(res, 401, "missing or wrong cluster token (Authorization: Bearer <token>)");
    // Its body was never read: the connection must not serve another request.
    net::CloseAfterAnswer(res);
    return httplib::Server::HandlerResponse::Handled;
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

// A request that may carry a body but says neither how long it is nor that it is chunked.
bool NeedsLength(const httplib::Request& req) {
  return (req.method == "POST" || req.method == "PUT" || req.method == "PATCH") &&
         !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding");
}

void InstallErrorHandlers(httplib::Server& server) {
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        net::ErrorResponse(res, 500, what);
      });
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = "request failed (HTTP " + std::to_string(res.status) + ")";
    if (res.status == 413) {
      // httplib caps form-encoded bodies far below our own 1 MiB limit.
      msg = req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0
                ? "form-encoded bodies over 8 KiB are refused: send JSON (application/json)"
                : "request body over 1 MiB";
    } else if (res.status == 404) {
      msg = "no such endpoint";
    } else if (res.status == 411 || (res.status == 400 && NeedsLength(req))) {
      msg = "a request body needs a Content-Length header";
    } else if (res.status == 400) {
      msg = "malformed HTTP request";
    }
    net::ErrorResponse(res, res.status, msg);
  });
}

using Handler = void (*)(const Api&, const httplib::Request&, httplib::Response&);

// Installs the token check, error handlers and every route under `prefix`
// (a regex; its captures come before the job id's); resolve finds the host
// a request is for, or answers it itself and returns nullptr.
void InstallRoutes(httplib::Server& server, const std::string& guarded, const std::string& prefix,
                   std::function<const Api*(const httplib::Request&, httplib::Response&)> resolve,
                   const std::string& token, metrics::Registry& metrics,
                   net::ConnectionGuard* guard) {
  server.set_payload_max_length(net::kMaxBodyBytes);
  server.set_pre_routing_handler(
      [guarded, token, &metrics](const httplib::Request& req, httplib::Response& res) {
        return CheckToken(guarded, token, metrics, req, res);
      });
  InstallErrorHandlers(server);
  auto route = [resolve, guard](Handler handler) {
    return [resolve, handler, guard](const httplib::Request& req, httplib::Response& res) {
      if (guard) guard->Busy(req);  // the request has fully arrived
      if (const Api* api = resolve(req, res)) handler(*api, req, res);
    };
  };
  server.Post(prefix + "/v1/jobs", route(HandleStartJobs));
  server.Get(prefix + "/v1/jobs", route(HandleListJobs));
  server.Get(prefix + R"(/v1/jobs/([^/]+))", route(HandleGetJob));
  server.Post(prefix + R"(/v1/jobs/([^/]+)/stop)", route(HandleStopJob));
  server.Get(prefix + R"(/v1/jobs/([^/]+)/logs)", route(HandleLogs));
}

}  // namespace

void InstallApi(httplib::Server& server, Supervisor& supervisor, Agent& agent,
                const std::string& token, metrics::Registry& metrics, net::ConnectionGuard* guard) {
  // The server outlives its handlers' calls; so do the objects Api refers to.
  auto api = std::make_shared<Api>(Api{supervisor, agent, metrics, guard});
  InstallRoutes(
      server, "/v1/", "", [api](const httplib::Request&, httplib::Response&) { return api.get(); },
      token, metrics, guard);
}

void InstallHostsApi(httplib::Server& server, const std::map<std::string, HostHandle>& hosts,
                     const std::string& token, metrics::Registry& metrics,
                     net::ConnectionGuard* guard) {
  auto apis = std::make_shared<std::map<std::string, Api>>();
  for (const auto& [id, h] : hosts) {
    apis->emplace(id, Api{*h.supervisor, *h.agent, metrics, guard});
  }
  auto resolve = [apis](const httplib::Request& req, httplib::Response& res) -> const Api* {
    auto it = apis->find(req.matches[1]);
    if (it != apis->end()) return &it->second;
    net::ErrorResponse(res, 404, "no host \"" + std::string(req.matches[1]) + "\" here");
    return nullptr;
  };
  InstallRoutes(server, kHostsPathPrefix, std::string(kHostsPathPrefix) + "([^/]+)", resolve, token,
                metrics, guard);
}

}  // namespace pgfleet::hostd
