#include "cli/ui/routes.h"

#include <spdlog/spdlog.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string_view>

#include "cli/ui/assets.h"
#include "cli/ui/job_log.h"
#include "cli/ui/params.h"

namespace pgfleet::cli::ui {

namespace {

constexpr const char* kJson = "application/json; charset=utf-8";

void Error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", message}}.dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace),
                  kJson);
}

// Runs a handler, turning what it throws into an answer.
httplib::Server::Handler Guarded(std::function<void(const httplib::Request&, httplib::Response&)> fn) {
  return [fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
    try {
      fn(req, res);
    } catch (const BadParam& e) {
      Error(res, 400, e.what());
    } catch (const pqxx::broken_connection& e) {
      Error(res, 503, std::string("database not reachable: ") + e.what());
    } catch (const pqxx::sql_error& e) {
      std::string msg = e.what();
      if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
      Error(res, 503, "database: " + msg);
    } catch (const std::exception& e) {
      spdlog::warn("pgfleet ui: {} {}: {}", req.method, req.path, e.what());
      Error(res, 500, e.what());
    }
  };
}

void ServeAsset(const std::string& name, httplib::Response& res) {
  for (const auto& a : kAssets) {
    if (name == a.name) {
      res.set_content(std::string(a.body), a.content_type);
      return;
    }
  }
  Error(res, 404, "no such asset");
}

}  // namespace

void InstallRoutes(httplib::Server& server, UiStore& store, ChangeFeed& feed) {
  server.set_default_headers({
      {"Content-Security-Policy",
       "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"},
      {"Cache-Control", "no-store"},
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res,
                                  std::exception_ptr) { Error(res, 500, "internal error"); });

  server.Get("/", Guarded([](const httplib::Request& req, httplib::Response& res) {
               OnlyParams(req, {});
               ServeAsset("index.html", res);
             }));
  server.Get(R"(/assets/([A-Za-z0-9_.-]{1,64}))",
             Guarded([](const httplib::Request& req, httplib::Response& res) {
               ServeAsset(req.matches[1], res);
             }));
  server.Get("/api/summary", Guarded([&store](const httplib::Request& req, httplib::Response& res) {
               OnlyParams(req, {});
               res.set_content(store.Summary(), kJson);
             }));
  server.Get("/api/hosts", Guarded([&store](const httplib::Request& req, httplib::Response& res) {
               OnlyParams(req, {});
               res.set_content(store.Hosts(), kJson);
             }));
  server.Get("/api/formations",
             Guarded([&store](const httplib::Request& req, httplib::Response& res) {
               OnlyParams(req, {});
               res.set_content(store.Formations(), kJson);
             }));
  server.Get("/api/jobs", Guarded([&store](const httplib::Request& req, httplib::Response& res) {
               res.set_content(store.Jobs(ParseJobsQuery(req)), kJson);
             }));
  server.Get(R"(/api/jobs/([^/]*))",
             Guarded([&store](const httplib::Request& req, httplib::Response& res) {
               OnlyParams(req, {});
               int64_t id = JobIdParam(req.matches[1]);
               auto job = store.Job(id);
               if (!job) return Error(res, 404, "no job " + std::to_string(id) + " visible to this login");
               res.set_content(job->json, kJson);
             }));
  server.Get(R"(/api/jobs/([^/]*)/log)",
             Guarded([&store](const httplib::Request& req, httplib::Response& res) {
               OnlyParams(req, {"attempt", "tail"});
               int64_t id = JobIdParam(req.matches[1]);
               int attempt = static_cast<int>(IntParam(req, "attempt", 1, 1000000, 0));
               int tail = static_cast<int>(IntParam(req, "tail", 0, 100000, 500));
               bool bad_attempt = false;
               std::string doc = JobLogJson(store, id, attempt, tail, &bad_attempt);
               if (bad_attempt) throw BadParam("attempt: job " + std::to_string(id) + " has no attempt " + std::to_string(attempt));
               if (doc.empty()) return Error(res, 404, "no job " + std::to_string(id) + " visible to this login");
               res.set_content(doc, kJson);
             }));
  server.Get("/api/events", [&feed](const httplib::Request& req, httplib::Response& res) {
    if (!req.params.empty()) return Error(res, 400, "/api/events takes no parameters");
    feed.Handle(req, res);
  });
  server.Get(".*", [](const httplib::Request&, httplib::Response& res) {
    Error(res, 404, "no such page or API route");
  });
  // Read-only: nothing here changes anything.
  auto refuse = [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Allow", "GET, HEAD");
    Error(res, 405, "the dashboard is read-only: GET only");
  };
  server.Post(".*", refuse);
  server.Put(".*", refuse);
  server.Patch(".*", refuse);
  server.Delete(".*", refuse);
  server.Options(".*", refuse);
}

}  // namespace pgfleet::cli::ui
