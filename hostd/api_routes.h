#pragma once
// What hostd's route handlers share (api.cpp: jobs; api_logs.cpp: logs).
// Internal to the API: api.h is its interface.

#include <httplib.h>

#include <cstdint>
#include <string>

#include "core/metrics/metrics.h"
#include "core/net/connection_guard.h"
#include "hostd/agent.h"
#include "hostd/collector.h"
#include "hostd/supervisor.h"

namespace pgfleet::hostd::routes {

// What the route handlers share. The references outlive the server.
struct Api {
  Supervisor& supervisor;
  Agent& agent;
  metrics::Registry& metrics;
  net::ConnectionGuard* guard;  // may be null
  Collector* collector;         // may be null (hosts that keep no attempt directories)
};

// The job id of a route: its last capture (hollow hosts' routes capture the host first).
std::string JobIdArg(const httplib::Request& req);

// A job id as POST /v1/jobs takes it: any positive 64-bit integer.
bool ParseId(const std::string& s, int64_t* out);

// Query parameter as a non-negative int; -1 when absent; throws SpecError when malformed.
int IntParam(const httplib::Request& req, const char* name);

// GET /v1/jobs/{id}/logs (api_logs.cpp)
void HandleLogs(const Api& api, const httplib::Request& req, httplib::Response& res);

}  // namespace pgfleet::hostd::routes
