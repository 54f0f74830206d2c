#include "hostd/api/api.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <functional>

#include "core/hostapi/hostapi.h"
#include "hostd/api/api_routes.h"

namespace pgfleet::hostd {

// In the data dir: the tickets this host took, until they expire (net::ReplayGuard).
constexpr const char* kUsedTicketsFile = "used-tickets";

namespace {

using nlohmann::json;
using routes::Api;
using routes::FlagParam;
using routes::HandleLogs;
using routes::IntParam;
using routes::JobIdOf;
using routes::RequestError;
using routes::TakeTicket;

void SendJson(httplib::Response& res, const json& body) {
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// GET /v1/jobs
void HandleListJobs(const Api& api, const httplib::Request&, httplib::Response& res) {
  json out = json::array();
  for (const auto& info : api.supervisor.List()) out.push_back(info.ToJson());
  SendJson(res, json{{"jobs", out}});
}

// GET /v1/jobs/{id}
void HandleGetJob(const Api& api, const httplib::Request& req, httplib::Response& res) {
  const int64_t id = JobIdOf(req);
  auto info = api.supervisor.Latest(id);
  if (!info) throw RequestError(404, "", "job " + std::to_string(id) + " is not known to this host");
  SendJson(res, info->ToJson());
}

// POST /v1/jobs/{id}/stop
void HandleStopJob(const Api& api, const httplib::Request& req, httplib::Response& res) {
  const int64_t id = JobIdOf(req);
  const int attempt = IntParam(req, "attempt");
  const bool force = FlagParam(req, "force");
  // Only a stop ticket for this job stops it: the cluster token does not.
  std::string why;
  auto t = TakeTicket(api, req.get_header_value(routes::kTicketHeader), net::TicketKind::kStop, id,
                      attempt < 0 ? 0 : attempt, &why);
  if (!t) throw RequestError(403, routes::kTicketHeader, std::string(routes::kTicketHeader) + ": " + why);
  if (!api.supervisor.Stop(id, t->attempt, force)) {
    throw RequestError(404, "", "job " + std::to_string(id) + " is not known to this host");
  }
  res.set_content(json{{"job", id}, {"status", "stopping"}}.dump(), "application/json");
}

// Every request under `guarded` (/v1/, or /hosts/ for hollow hosts) needs the
// cluster token, except looking into a job with a ticket (GET .../logs,
// GET .../fs, POST .../exec: the route checks the ticket) and the stdin of
// an exec session (POST .../exec/stdin with the session's name). What starts or
// stops a job is its ticket (checked by the route), never the token alone.
httplib::Server::HandlerResponse CheckToken(const std::string& guarded, const std::string& token,
                                            metrics::Registry& metrics, const httplib::Request& req,
                                            httplib::Response& res) {
  if (req.path.rfind(guarded, 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
  // Looking into a job with a ticket (pgfleet.host_ticket) needs no token.
  auto ends_with = [&req](const std::string& tail) {
    return req.path.size() > tail.size() &&
           req.path.compare(req.path.size() - tail.size(), tail.size(), tail) == 0;
  };
  bool job_ticket = (req.has_header(routes::kTicketHeader) &&
                     ((req.method == "GET" && (ends_with("/logs") || ends_with("/fs"))) ||
                      (req.method == "POST" && ends_with("/exec")))) ||
                    // An exec session's name is its capability (the route checks it).
                    (req.has_header(routes::kExecSessionHeader) && req.method == "POST" &&
                     ends_with("/exec/stdin"));
  if (!job_ticket && !net::Authorized(req, token)) {
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
  // A handler's exception is a bug or a broken host, not the caller's
  // business: it is logged with a number, and the caller gets the number
  // (its text may name paths, peers or internals).
  server.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        static std::atomic<uint64_t> errors{0};
        const uint64_t n = ++errors;
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("api: {} {} failed (error {}): {}", req.method, req.path, n, what);
        net::ErrorResponse(res, 500,
                           "internal error " + std::to_string(n) + " (in the host's log)");
      });
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = "request failed (HTTP " + std::to_string(res.status) + ")";
    if (res.status == 413) {
      // httplib caps form-encoded bodies far below our own limits.
      msg = req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0
                ? "form-encoded bodies over 8 KiB are refused: send JSON (application/json)"
                : "request body over " + std::to_string(net::kMaxJobsBodyBytes >> 20) + " MiB";
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
  // The largest any route takes; each other route refuses more than kMaxBodyBytes.
  server.set_payload_max_length(net::kMaxJobsBodyBytes);
  server.set_pre_routing_handler(
      [guarded, token, &metrics](const httplib::Request& req, httplib::Response& res) {
        return CheckToken(guarded, token, metrics, req, res);
      });
  InstallErrorHandlers(server);
  auto route = [resolve, guard](Handler handler, size_t max_body = net::kMaxBodyBytes) {
    return [resolve, handler, guard, max_body](const httplib::Request& req, httplib::Response& res) {
      if (guard) guard->Busy(req);  // the request has fully arrived
      if (req.body.size() > max_body) {
        net::ErrorResponse(res, 413, "request body over " + std::to_string(max_body >> 20) + " MiB");
        return;
      }
      const Api* api = resolve(req, res);
      if (!api) return;
      try {
        handler(*api, req, res);
      } catch (const RequestError& e) {
        net::ErrorResponse(res, e.status(), e.what());
      }
    };
  };
  server.Post(prefix + hostapi::kJobsPath, route(routes::HandleStartJobs, net::kMaxJobsBodyBytes));
  server.Get(prefix + hostapi::kJobsPath, route(HandleListJobs));
  server.Get(prefix + hostapi::kJobRoute, route(HandleGetJob));
  server.Post(prefix + hostapi::kStopRoute, route(HandleStopJob));
  server.Get(prefix + hostapi::kLogsRoute, route(HandleLogs));
  server.Get(prefix + hostapi::kFsRoute, route(routes::HandleFs));
  server.Post(prefix + hostapi::kExecRoute, route(routes::HandleExec));
  server.Post(prefix + hostapi::kExecStdinRoute, route(routes::HandleExecStdin));
}

}  // namespace

void InstallApi(httplib::Server& server, Supervisor& supervisor, Agent& agent,
                const std::string& token, metrics::Registry& metrics, net::ConnectionGuard* guard,
                Collector* collector) {
  // The server outlives its handlers' calls; so do the objects Api refers to.
  // Tickets taken are kept in the data dir: one used before a restart is
  // refused after it too.
  const std::string& data_dir = agent.Config().data_dir;
  auto replay = data_dir.empty() ? std::make_shared<net::ReplayGuard>()
                                 : std::make_shared<net::ReplayGuard>(
                                       data_dir + "/" + kUsedTicketsFile, net::UnixNow());
  if (!replay->journal_ok()) {
    spdlog::warn("host={} cannot keep the tickets it takes in {}/{}: a restart forgets them",
                 agent.Config().id, data_dir, kUsedTicketsFile);
  }
  auto api = std::make_shared<Api>(Api{supervisor, agent, metrics, guard, collector, replay, token});
  InstallRoutes(
      server, "/v1/", "", [api](const httplib::Request&, httplib::Response&) { return api.get(); },
      token, metrics, guard);
}

void InstallHostsApi(httplib::Server& server, const std::map<std::string, HostHandle>& hosts,
                     const std::string& token, metrics::Registry& metrics,
                     net::ConnectionGuard* guard) {
  auto apis = std::make_shared<std::map<std::string, Api>>();
  for (const auto& [id, h] : hosts) {
    apis->emplace(id, Api{*h.supervisor, *h.agent, metrics, guard, nullptr,
                          std::make_shared<net::ReplayGuard>(), token});
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
