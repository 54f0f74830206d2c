#pragma once
// What hostd's route handlers share (api.cpp: the shared checks, listing,
// reading and stopping jobs, and the routing; api_start.cpp: starting a
// batch; api_logs.cpp, api_fs.cpp, api_exec.cpp: logs, files, exec).
// Internal to the API: api.h is its interface.

#include <httplib.h>

#include <cstdint>
#include <memory>
#include <optional>
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

// Checks `text` as this host's ticket of `kind` for job/attempt (attempt 0:
// any attempt, the ticket's is then returned) and takes it (never twice).
// Returns the ticket, or nullopt with *why naming the rule it broke (counted
// in pgfleet_host_api_tickets_refused_total).
std::optional<net::Ticket> TakeTicket(const Api& api, const std::string& text, net::TicketKind kind,
                                      int64_t job, int attempt, std::string* why);

// True when the request carries the cluster token (the pre-routing check
// lets a logs request with a ticket header through without it).
bool HasClusterToken(const Api& api, const httplib::Request& req);

// The job id of a route: its last capture (hollow hosts' routes capture the host first).
std::string JobIdArg(const httplib::Request& req);

// A job id as POST /v1/jobs takes it: any positive 64-bit integer.
bool ParseId(const std::string& s, int64_t* out);

// Query parameter as a non-negative int; -1 when absent; throws SpecError when malformed.
int IntParam(const httplib::Request& req, const char* name);

// Answers 410 when the attempt's directory was collected (attempt 0: the
// job's latest collected attempt) and returns true; false when it was not.
bool AnswerCollected(const Api& api, httplib::Response& res, int64_t id, int attempt);

// Lets the request through with the cluster token, or takes its ticket of
// `kind` for job id (and attempt, if > 0): false, having answered 403 naming
// the rule, when it has neither. *attempt becomes the ticket's when it had none.
bool AuthorizeJobRequest(const Api& api, const httplib::Request& req, httplib::Response& res,
                         net::TicketKind kind, int64_t id, int* attempt);

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
