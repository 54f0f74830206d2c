#pragma once
// What hostd's route handlers share (api_routes.cpp: the shared checks;
// api.cpp: listing, reading and stopping jobs, and the routing;
// api_start.cpp: starting a batch; api_logs.cpp, api_fs.cpp, api_exec.cpp:
// logs, files, exec). Internal to the API: api.h is its interface.
//
// Errors (ARCHITECTURE.md, "Errors"): a request the API refuses is a
// RequestError, thrown by whichever step finds it and answered by the route
// wrapper (api.cpp) as {"error": message} with its status; any other
// exception is the host's own failure, logged with a number and answered
// 500 with that number only.

#include <httplib.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/metrics/metrics.h"
#include "core/net/connection_guard.h"
#include "core/net/ticket.h"
#include "hostd/agent/agent.h"
#include "hostd/attempt/collector.h"
#include "hostd/supervisor/supervisor.h"

namespace pgfleet::hostd::routes {

// What the route handlers share. The references outlive the server.
struct Api {
  Supervisor& supervisor;
  Agent& agent;
  metrics::Registry& metrics;
  net::ConnectionGuard* guard;               // may be null
  Collector* collector;                      // may be null (hosts that keep no attempt directories)
  std::shared_ptr<net::ReplayGuard> replay;  // the tickets this host took
  std::string token;                         // the cluster token
};

using net::kExecSessionHeader;
using net::kTicketHeader;

// A request refused: its HTTP status, the parameter or header it names ("" for
// none), and a message that names the rule, for the caller.
class RequestError : public std::runtime_error {
 public:
  RequestError(int status, std::string field, const std::string& message)
      : std::runtime_error(message), status_(status), field_(std::move(field)) {}
  int status() const { return status_; }
  const std::string& field() const { return field_; }

 private:
  int status_;
  std::string field_;
};

// 400 naming the parameter `field`.
[[noreturn]] void BadParam(const std::string& field, const std::string& message);

// Checks `text` as this host's ticket of `kind` for job/attempt (attempt 0:
// any attempt, the ticket's is then returned) and takes it (never twice).
// Returns the ticket, or nullopt with *why naming the rule it broke (counted
// in pgfleet_host_api_tickets_refused_total).
std::optional<net::Ticket> TakeTicket(const Api& api, const std::string& text, net::TicketKind kind,
                                      int64_t job, int attempt, std::string* why);

// True when the request carries the cluster token (the pre-routing check
// lets a logs request with a ticket header through without it).
bool HasClusterToken(const Api& api, const httplib::Request& req);

// The job id of a route, its last capture (hollow hosts' routes capture the
// host first): a positive integer, else RequestError 400.
int64_t JobIdOf(const httplib::Request& req);

// A job id as POST /v1/jobs takes it: any positive 64-bit integer.
bool ParseId(const std::string& s, int64_t* out);

// Query parameter as a non-negative int; -1 when absent; BadParam when malformed.
int IntParam(const httplib::Request& req, const char* name);
// Query parameter 0 or 1 (absent: false); BadParam otherwise.
bool FlagParam(const httplib::Request& req, const char* name);

// RequestError 410 when the attempt's directory was collected (attempt 0:
// the job's latest collected attempt).
void RefuseIfCollected(const Api& api, int64_t id, int attempt);

// An attempt's directory on this host, kept from the collector while `hold` lives.
struct HeldAttempt {
  std::string dir;
  int attempt = 0;
  std::shared_ptr<void> hold;
};
// The directory of job id's attempt (attempt <= 0: its latest), held:
// RequestError 410 when it was collected, 404 saying `missing` when this
// host has none.
HeldAttempt HoldAttemptDir(const Api& api, int64_t id, int attempt, const std::string& missing);

// Lets the request through with the cluster token, or takes its ticket of
// `kind` for job id (and attempt, if > 0): RequestError 403 naming the rule
// when it has neither. *attempt becomes the ticket's when it had none.
void AuthorizeJobRequest(const Api& api, const httplib::Request& req, net::TicketKind kind,
                         int64_t id, int* attempt);

// RequestError 404 when this host runs no processes (driver sim): `what`
// names what was asked for ("no logs for job 7").
void RefuseIfSimulated(const Api& api, const std::string& what);

// GET /v1/jobs/{id}/logs (api_logs.cpp)
void HandleLogs(const Api& api, const httplib::Request& req, httplib::Response& res);
// GET /v1/jobs/{id}/fs?path=P (api_fs.cpp)
void HandleFs(const Api& api, const httplib::Request& req, httplib::Response& res);
// POST /v1/jobs: start a dispatched batch (api_start.cpp).
void HandleStartJobs(const Api& api, const httplib::Request& req, httplib::Response& res);
// POST /v1/jobs/{id}/exec (api_exec.cpp)
void HandleExec(const Api& api, const httplib::Request& req, httplib::Response& res);
// POST /v1/jobs/{id}/exec/stdin: more stdin (or a resize) for a streamed exec.
void HandleExecStdin(const Api& api, const httplib::Request& req, httplib::Response& res);

}  // namespace pgfleet::hostd::routes
