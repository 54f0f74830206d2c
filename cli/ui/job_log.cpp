#include "cli/ui/job_log.h"

#include <nlohmann/json.hpp>

#include "core/hostapi/hostapi.h"
#include "core/net/endpoint.h"
#include "core/net/ticket.h"

namespace pgfleet::cli::ui {

namespace {

// The host's answer, or "" with *why.
std::string FromHost(const std::string& api_url, const std::string& ticket, int64_t id,
                     int attempt, int tail, std::string* why) {
  try {
    auto ep = net::MakeEndpoint(api_url, "", 3);
    httplib::Headers headers{{net::kTicketHeader, ticket}};
    std::string path = ep.prefix + hostapi::LogsPath(id, attempt) + "&tail=" + std::to_string(tail);
    std::string body;
    int status = 0;
    auto res = ep.client->Get(
        path.c_str(), headers,
        [&](const httplib::Response& r) {
          status = r.status;
          return true;
        },
        [&](const char* data, size_t len) {
          body.append(data, std::min(len, kMaxLogBytes - std::min(body.size(), kMaxLogBytes)));
          return body.size() < kMaxLogBytes;
        });
    if (status == 200) return body;
    if (status == 0 && !res) {
      *why = "host not reachable (" + httplib::to_string(res.error()) + ")";
      return "";
    }
    try {
      *why = "host: " + nlohmann::json::parse(body).at("error").get<std::string>();
    } catch (const std::exception&) {
      *why = "host answered HTTP " + std::to_string(status);
    }
  } catch (const std::exception& e) {
    *why = std::string("host not reachable: ") + e.what();
  }
  return "";
}

}  // namespace

std::string JobLogJson(UiStore& store, int64_t id, int attempt, int tail, bool* bad_attempt) {
  auto job = store.Job(id);
  if (!job) return "";
  auto doc = nlohmann::json::parse(job->json);
  int latest = doc.value("attempt", 0);
  nlohmann::json out{{"attempt", attempt > 0 ? attempt : latest}, {"source", "none"}, {"text", ""}};
  int a = attempt > 0 ? attempt : latest;
  if (a > latest) {
    *bad_attempt = true;
    return "";
  }
  if (a == 0) {
    out["note"] = "the job has not run yet";
    return out.dump();
  }
  std::string api = a == latest ? job->api_url : store.AttemptHostApi(id, a);
  std::string why;
  if (api.empty()) {
    why = "the host that ran it is not registered";
  } else {
    std::string ticket = store.LogTicket(id, a, &why);
    if (!ticket.empty()) {
      std::string text = FromHost(api, ticket, id, a, tail, &why);
      if (why.empty()) {
        out["source"] = "host";
        out["text"] = text;
        return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
    } else {
      why = "no log ticket: " + why;
    }
  }
  out["note"] = why;
  if (a == latest && doc.contains("output_tail") && doc["output_tail"].is_string()) {
    out["source"] = "database";
    out["text"] = doc["output_tail"];
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace pgfleet::cli::ui
