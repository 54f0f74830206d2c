#pragma once
// HTTP pieces shared by the daemons and the CLI: the cluster token, request
// authentication, a client for a host's API URL, /health and /metrics.

#include <httplib.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/metrics/metrics.h"

namespace pgfleet::net {

// Largest request body any pgfleet API accepts; bigger ones get 413.
inline constexpr size_t kMaxBodyBytes = 1 << 20;

// Reads the cluster token (trimmed). Throws std::runtime_error naming the file
// when it is missing, unreadable or empty.
std::string ReadTokenFile(const std::string& path);

// True when the request carries "Authorization: Bearer <token>" (constant-time compare).
bool Authorized(const httplib::Request& req, const std::string& token);

// Writes {"error": message} with the given status.
void ErrorResponse(httplib::Response& res, int status, const std::string& message);

// A client for "http://host:port" with the token set and short timeouts.
// Throws std::invalid_argument for a URL that is not http://host:port.
std::unique_ptr<httplib::Client> MakeClient(const std::string& base_url, const std::string& token,
                                            int timeout_seconds = 5);

// Settings every pgfleet HTTP server needs; call before binding (TCP_NODELAY
// is set on the listening socket, and accepted ones inherit it).
void PrepareServer(httplib::Server& server);

// Serves GET /health and GET /metrics (no auth: they reveal nothing sensitive).
void AddHealthAndMetrics(httplib::Server& server, const metrics::Registry& metrics,
                         const std::string& who);

}  // namespace pgfleet::net
