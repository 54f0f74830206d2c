#include "core/net/http.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <stdexcept>

#include "core/util/text.h"

namespace pgfleet::net {

std::string ReadTokenFile(const std::string& path) {
  if (path.empty()) throw std::runtime_error("--token-file is required (the cluster token)");
  std::string token = util::Trim(util::ReadFile(path));
  if (token.empty()) throw std::runtime_error("token file " + path + " is empty");
  return token;
}

bool Authorized(const httplib::Request& req, const std::string& token) {
  auto h = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (h.size() != prefix.size() + token.size() || h.compare(0, prefix.size(), prefix) != 0) {
    return false;
  }
  unsigned char diff = 0;
  for (size_t i = 0; i < token.size(); ++i) diff |= h[prefix.size() + i] ^ token[i];
  return diff == 0;
}

void ErrorResponse(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", message}}.dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace),
                  "application/json");
}

namespace {
TlsFiles& ClientTls() {
  static TlsFiles tls;
  return tls;
}
}  // namespace

void CheckTlsFiles(const TlsFiles& tls) {
  if (tls.cert.empty() != tls.key.empty()) {
    throw std::invalid_argument("--tls-cert and --tls-key go together: give both or neither");
  }
  for (const auto& [flag, path] : {std::pair<const char*, const std::string*>{"--tls-ca", &tls.ca},
                                   {"--tls-cert", &tls.cert},
                                   {"--tls-key", &tls.key}}) {
    if (path->empty()) continue;
    std::ifstream f(*path);
    if (!f) throw std::invalid_argument(std::string(flag) + " " + *path + " cannot be read");
  }
}

void SetClientTls(const TlsFiles& tls) { ClientTls() = tls; }

std::unique_ptr<httplib::Client> MakeClient(const std::string& base_url, const std::string& token,
                                            int timeout_seconds) {
  static const std::regex url_re(R"(^https?://[^/\s:]+(:\d+)?/?$)");
  if (!std::regex_match(base_url, url_re)) {
    throw std::invalid_argument(
        "api_url must look like http://host:port or https://host:port (got \"" + base_url + "\")");
  }
  std::string url = base_url;
  if (url.back() == '/') url.pop_back();
  const TlsFiles& tls = ClientTls();
  bool https = url.rfind("https://", 0) == 0;
  auto c = https && !tls.cert.empty() ? std::make_unique<httplib::Client>(url, tls.cert, tls.key)
                                      : std::make_unique<httplib::Client>(url);
  if (https) {
    if (!tls.ca.empty()) c->set_ca_cert_path(tls.ca.c_str());
    c->enable_server_certificate_verification(true);
  }
  c->set_connection_timeout(timeout_seconds, 0);
  c->set_read_timeout(timeout_seconds, 0);
  c->set_write_timeout(timeout_seconds, 0);
  c->set_bearer_token_auth(token.c_str());
  // httplib writes a request's headers and body separately: with Nagle's
  // algorithm the body then waits for the server's delayed ACK (~40 ms).
  c->set_tcp_nodelay(true);
  return c;
}

void PrepareServer(httplib::Server& server) {
  // httplib writes a response's headers and body separately: with Nagle's
  // algorithm the body waits for the client's delayed ACK, 40 ms an answer
  // (docs/decisions/0001).
  server.set_tcp_nodelay(true);
  // Schedulers keep their connections alive between passes (net::ClientPool);
  // httplib's default closes a connection after 5 requests.
  server.set_keep_alive_max_count(10000);
}

void AddHealthAndMetrics(httplib::Server& server, const metrics::Registry& metrics,
                         const std::string& who) {
  server.Get("/health", [who](const httplib::Request&, httplib::Response& res) {
    res.set_content(nlohmann::json{{"status", "ok"}, {"id", who}}.dump(), "application/json");
  });
  server.Get("/metrics", [&metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.Render(), "text/plain; version=0.0.4");
  });
}

}  // namespace pgfleet::net
