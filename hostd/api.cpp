#include "hostd/api.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <thread>

#include "core/model/job_spec.h"

namespace pgfleet::hostd {
namespace {

using nlohmann::json;

// Starts of one dispatched batch run this many at a time.
constexpr size_t kParallelStarts = 4;

struct StartItem {
  int64_t job = 0;
  int attempt = 0;
  model::JobSpec spec;
};

// Parses the whole batch first so a bad item starts nothing. Throws SpecError.
std::vector<StartItem> ParseStartBatch(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) throw model::SpecError("body", "body must be valid JSON");
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
      throw model::SpecError(at + ".spec." + err.field(), at + ".spec: " + err.what());
    }
    items.push_back(std::move(item));
  }
  return items;
}

// The job id of a route: its last capture (hollow hosts' routes capture the host first).
std::string JobIdArg(const httplib::Request& req) { return req.matches[req.matches.size() - 1]; }

bool ParseId(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  *out = std::stoll(s);
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

std::string LastLines(const std::string& text, int lines) {
  if (lines < 0) return text;
  if (lines == 0) return "";
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  int seen = 0;
  while (pos > 0) {
    --pos;
    if (text[pos] == '\n' && ++seen == lines) return text.substr(pos + 1);
  }
  return text;
}

// What the route handlers share. The references outlive the server.
struct Api {
  Supervisor& supervisor;
  Agent& agent;
  metrics::Registry& metrics;
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

// Streams what the attempt's log gains after `offset` until the attempt has
// ended and everything is sent (or the client goes away).
void FollowLog(const Api& api, httplib::Response& res, int64_t id, int attempt, std::string path,
               std::string first, size_t offset) {
  auto sent_first = std::make_shared<bool>(false);
  auto pos = std::make_shared<size_t>(offset);
  Supervisor& supervisor = api.supervisor;
  res.set_chunked_content_provider("text/plain", [&supervisor, id, attempt, path, first, sent_first,
                                                  pos](size_t, httplib::DataSink& sink) {
    if (!*sent_first) {
      *sent_first = true;
      if (!first.empty() && !sink.write(first.data(), first.size())) return false;
    }
    for (int waited = 0; waited < 50; ++waited) {
      bool live = supervisor.Live(id, attempt);
      std::ifstream f(path, std::ios::binary);
      f.seekg(static_cast<std::streamoff>(*pos));
      std::string chunk(64 * 1024, '\0');
      f.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      chunk.resize(static_cast<size_t>(f.gcount()));
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
  try {
    attempt = IntParam(req, "attempt");
    tail = IntParam(req, "tail");
    follow = IntParam(req, "follow");
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
  std::string initial;
  {
    std::ifstream f(path, std::ios::binary);
    initial.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  std::string first = LastLines(initial, tail);
  if (follow <= 0) {
    res.set_content(first, "text/plain");
    return;
  }
  FollowLog(api, res, id, attempt, path, first, initial.size());
}

// Every request under `guarded` (/v1/, or /hosts/ for hollow hosts) needs the cluster token.
httplib::Server::HandlerResponse CheckToken(const std::string& guarded, const std::string& token,
                                            metrics::Registry& metrics, const httplib::Request& req,
                                            httplib::Response& res) {
  if (req.path.rfind(guarded, 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
  if (!net::Authorized(req, token)) {
    metrics.Add("pgfleet_host_api_unauthorized_total", 1);
    net::ErrorResponse(res, 401, "missing or wrong cluster token (Authorization: Bearer <token>)");
    return httplib::Server::HandlerResponse::Handled;
  }
  return httplib::Server::HandlerResponse::Unhandled;
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
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      std::string msg = res.status == 413   ? "request body over 1 MiB"
                        : res.status == 404 ? "no such endpoint"
                                            : "request failed";
      net::ErrorResponse(res, res.status, msg);
    }
  });
}

using Handler = void (*)(const Api&, const httplib::Request&, httplib::Response&);

// Installs the token check, error handlers and every route under `prefix`
// (a regex; its captures come before the job id's); resolve finds the host
// a request is for, or answers it itself and returns nullptr.
void InstallRoutes(httplib::Server& server, const std::string& guarded, const std::string& prefix,
                   std::function<const Api*(const httplib::Request&, httplib::Response&)> resolve,
                   const std::string& token, metrics::Registry& metrics) {
  server.set_payload_max_length(net::kMaxBodyBytes);
  server.set_pre_routing_handler(
      [guarded, token, &metrics](const httplib::Request& req, httplib::Response& res) {
        return CheckToken(guarded, token, metrics, req, res);
      });
  InstallErrorHandlers(server);
  auto route = [resolve](Handler handler) {
    return [resolve, handler](const httplib::Request& req, httplib::Response& res) {
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
                const std::string& token, metrics::Registry& metrics) {
  // The server outlives its handlers' calls; so do the objects Api refers to.
  auto api = std::make_shared<Api>(Api{supervisor, agent, metrics});
  InstallRoutes(
      server, "/v1/", "", [api](const httplib::Request&, httplib::Response&) { return api.get(); },
      token, metrics);
}

void InstallHostsApi(httplib::Server& server, const std::map<std::string, HostHandle>& hosts,
                     const std::string& token, metrics::Registry& metrics) {
  auto apis = std::make_shared<std::map<std::string, Api>>();
  for (const auto& [id, h] : hosts) apis->emplace(id, Api{*h.supervisor, *h.agent, metrics});
  auto resolve = [apis](const httplib::Request& req, httplib::Response& res) -> const Api* {
    auto it = apis->find(req.matches[1]);
    if (it != apis->end()) return &it->second;
    net::ErrorResponse(res, 404, "no host \"" + std::string(req.matches[1]) + "\" here");
    return nullptr;
  };
  InstallRoutes(server, kHostsPathPrefix, std::string(kHostsPathPrefix) + "([^/]+)", resolve, token,
                metrics);
}

}  // namespace pgfleet::hostd
