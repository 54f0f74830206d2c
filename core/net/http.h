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
// But hostd's POST /v1/jobs, whose one job may carry 1 MiB of files
// (model::kMaxFilesBytes): escaped as JSON text (at most twice its bytes:
// control characters are refused, base64 is 4/3) with a spec of its biggest
// command and env, it stays below this.
inline constexpr size_t kMaxJobsBodyBytes = 4 << 20;

// Reads the cluster token (trimmed). Throws std::runtime_error naming the file
// when it is missing, unreadable or empty.
std::string ReadTokenFile(const std::string& path);

// True when the request carries "Authorization: Bearer <token>" (constant-time compare).
bool Authorized(const httplib::Request& req, const std::string& token);

// Writes {"error": message} with the given status.
void ErrorResponse(httplib::Response& res, int status, const std::string& message);

// TLS for the host API (optional). A daemon given a certificate and key
// serves HTTPS; given a CA file, a server asks its clients for certificates
// signed by it (mutual TLS), and a client trusts only servers it signed.
struct TlsFiles {
  std::string ca;    // --tls-ca
  std::string cert;  // --tls-cert
  std::string key;   // --tls-key
};
// Checks that each file given can be read and that cert and key come
// together. Throws std::invalid_argument naming the flag.
void CheckTlsFiles(const TlsFiles& tls);
// What every client made by MakeClient uses for https:// URLs: set once at
// start, before any client is made (daemons: their --tls-* flags; the CLI:
// $PGFLEET_TLS_CA, $PGFLEET_TLS_CERT, $PGFLEET_TLS_KEY).
void SetClientTls(const TlsFiles& tls);

// A client for "http://host:port" or "https://host:port" with the token set
// and short timeouts (https: the server's certificate is verified against
// the CA of SetClientTls, else the system's; the client certificate of
// SetClientTls is presented). Throws std::invalid_argument for another URL.
std::unique_ptr<httplib::Client> MakeClient(const std::string& base_url, const std::string& token,
                                            int timeout_seconds = 5);

// Settings every pgfleet HTTP server needs; call before binding (TCP_NODELAY
// is set on the listening socket, and accepted ones inherit it).
void PrepareServer(httplib::Server& server);

// Serves GET /health and GET /metrics (no auth: they reveal nothing sensitive).
void AddHealthAndMetrics(httplib::Server& server, const metrics::Registry& metrics,
                         const std::string& who);

}  // namespace pgfleet::net
