#include "hostd/api/api_routes.h"

#include "core/util/text.h"

namespace pgfleet::hostd::routes {

void BadParam(const std::string& field, const std::string& message) {
  throw RequestError(400, field, message);
}

int64_t JobIdOf(const httplib::Request& req) {
  int64_t id;
  if (!ParseId(req.matches[req.matches.size() - 1], &id)) {
    throw RequestError(400, "id", "job id must be a positive integer");
  }
  return id;
}

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

int IntParam(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return -1;
  std::string v = req.get_param_value(name);
  int64_t n = 0;
  if (v == "0") return 0;
  if (!ParseId(v, &n) || n > INT32_MAX) {
    BadParam(name, std::string(name) + " must be a non-negative integer (got \"" + v.substr(0, 20) +
                       "\")");
  }
  return static_cast<int>(n);
}

bool FlagParam(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return false;
  const std::string v = req.get_param_value(name);
  if (v != "0" && v != "1") {
    BadParam(name, std::string(name) + " must be 0 or 1 (got \"" + v.substr(0, 20) + "\")");
  }
  return v == "1";
}

void RefuseIfSimulated(const Api& api, const std::string& what) {
  if (api.supervisor.RunsProcesses()) return;
  throw RequestError(404, "", what + ": this host is simulated (driver sim), its jobs run no process");
}

std::optional<net::Ticket> TakeTicket(const Api& api, const std::string& text, net::TicketKind kind,
                                      int64_t job, int attempt, std::string* why) {
  const HostConfig& self = api.agent.Config();
  int64_t now = net::UnixNow();
  auto refused = [&api]() -> std::optional<net::Ticket> {
    api.metrics.Add("pgfleet_host_api_tickets_refused_total", 1);
    return std::nullopt;
  };
  auto t = net::VerifyTicket(text, self.ticket_key, kind, self.id, now, why);
  if (!t) return refused();
  if (t->job != job || (attempt > 0 && t->attempt != attempt)) {
    *why = "ticket is for job " + std::to_string(t->job) + " attempt " +
           std::to_string(t->attempt) + ", not job " + std::to_string(job) +
           (attempt > 0 ? " attempt " + std::to_string(attempt) : std::string());
    return refused();
  }
  if (!api.replay->FirstUse(*t, now)) {
    *why = "ticket already used (a ticket is taken once)";
    return refused();
  }
  return t;
}

bool HasClusterToken(const Api& api, const httplib::Request& req) {
  return net::Authorized(req, api.token);
}

void AuthorizeJobRequest(const Api& api, const httplib::Request& req, net::TicketKind kind,
                         int64_t id, int* attempt) {
  if (HasClusterToken(api, req)) return;
  std::string why;
  auto t = TakeTicket(api, req.get_header_value(kTicketHeader), kind, id,
                      *attempt < 0 ? 0 : *attempt, &why);
  if (!t) throw RequestError(403, kTicketHeader, std::string(kTicketHeader) + ": " + why);
  *attempt = t->attempt;
}

void RefuseIfCollected(const Api& api, int64_t id, int attempt) {
  if (!api.collector) return;
  auto c = api.collector->Find(id, &attempt);
  if (!c) return;
  throw RequestError(410, "",
                     "the log of job " + std::to_string(id) + " attempt " +
                         std::to_string(attempt) + " was collected at " +
                         util::IsoTime(c->collected) + " (the attempt ended at " +
                         util::IsoTime(c->ended) + "; hostd --gc-after, --gc-disk-percent)");
}

HeldAttempt HoldAttemptDir(const Api& api, int64_t id, int attempt, const std::string& missing) {
  const int want = attempt < 0 ? 0 : attempt;
  const std::string log = api.supervisor.LogPath(id, want);
  if (log.empty()) {
    RefuseIfCollected(api, id, want);
    throw RequestError(404, "", missing);
  }
  HeldAttempt out;
  out.dir = log.substr(0, log.rfind('/'));
  // <job>-<attempt>: the attempt it is when none was asked for.
  out.attempt = want > 0 ? want : std::stoi(out.dir.substr(out.dir.rfind('-') + 1));
  // Held before looking again: the collector either sees the hold, or has
  // already recorded the attempt as collected.
  out.hold = api.collector ? api.collector->Hold(id, out.attempt) : nullptr;
  RefuseIfCollected(api, id, out.attempt);
  return out;
}

}  // namespace pgfleet::hostd::routes
