#pragma once
// hostd's HTTP API (JSON; every /v1 call needs "Authorization: Bearer <token>"):
//   POST /v1/jobs                  {"jobs":[{"job":1,"attempt":1,"spec":{...}}]}: start, idempotent
//   GET  /v1/jobs                  attempts known to this hostd
//   GET  /v1/jobs/{id}             the job's latest attempt here
//   POST /v1/jobs/{id}/stop        [?attempt=N] SIGTERM, grace, SIGKILL
//   GET  /v1/jobs/{id}/logs        [?attempt=N&tail=LINES&follow=1] output (stdout+stderr)
// Bad requests get 4xx with {"error": "..."} naming the field; nothing is started.

#include <httplib.h>

#include <string>

#include "core/net/http.h"
#include "hostd/agent.h"
#include "hostd/supervisor.h"

namespace pgfleet::hostd {

void InstallApi(httplib::Server& server, Supervisor& supervisor, Agent& agent,
                const std::string& token, metrics::Registry& metrics);

}  // namespace pgfleet::hostd
