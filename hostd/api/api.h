#pragma once
// hostd's HTTP API (JSON; every /v1 call needs "Authorization: Bearer <token>",
// except reading logs with a ticket; what starts or stops a job is a host
// ticket, core/net/ticket.h, never the token alone):
//   POST /v1/jobs {"jobs":[{"job":1,"attempt":1,"spec":{...},"ticket":"v1:dispatch:..."}]}:
//                                  start; one bad ticket (forged, expired, for another host
//                                  or job, used before) starts nothing of the batch: 403
//   GET  /v1/jobs                  attempts known to this hostd
//   GET  /v1/jobs/{id}             the job's latest attempt here
//   POST /v1/jobs/{id}/stop        [?attempt=N] SIGTERM, grace, SIGKILL; needs a stop
//                                  ticket in X-Pgfleet-Ticket
//   GET  /v1/jobs/{id}/logs        [?attempt=N&tail=LINES&follow=1&offset=BYTES] output;
//                                  the token, or a logs ticket (pgfleet.log_ticket) in
//                                  X-Pgfleet-Ticket (stdout+stderr), streamed 64 KiB at a time;
//                                  tail <= 100000 lines, found reading backwards (within the last
//                                  64 MiB); offset: resume a stream from that byte. Positions count
//                                  bytes of the whole output, across its rotated files
//                                  (output_log.h); the answer's X-Log-Offset says where its
//                                  first byte is, X-Log-First the oldest byte still kept
// Bad requests get 4xx with {"error": "..."} naming the field; nothing is started.
//
// Hollow hosts (hollow.h) share one listener: host X's API is the same under
// /hosts/X (POST /hosts/X/v1/jobs, ...); the token guards every /hosts/ path.

#include <httplib.h>

#include <map>
#include <string>

#include "core/net/connection_guard.h"
#include "core/net/http.h"
#include "hostd/agent/agent.h"
#include "hostd/attempt/collector.h"
#include "hostd/supervisor/supervisor.h"

namespace pgfleet::hostd {

// guard (may be null): bounds slow and numerous clients; its Install() must
// have been called on the server (core/net/connection_guard.h).
// collector (may be null): where collected attempts are remembered.
void InstallApi(httplib::Server& server, Supervisor& supervisor, Agent& agent,
                const std::string& token, metrics::Registry& metrics,
                net::ConnectionGuard* guard = nullptr, Collector* collector = nullptr);

inline constexpr const char* kHostsPathPrefix = "/hosts/";

// One host behind a shared listener; both outlive the server.
struct HostHandle {
  Supervisor* supervisor = nullptr;
  Agent* agent = nullptr;
};
// Serves each host of `hosts` (by id) under /hosts/<id>; other ids get 404.
void InstallHostsApi(httplib::Server& server, const std::map<std::string, HostHandle>& hosts,
                     const std::string& token, metrics::Registry& metrics,
                     net::ConnectionGuard* guard = nullptr);

}  // namespace pgfleet::hostd
