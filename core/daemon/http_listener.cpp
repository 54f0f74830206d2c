#include "core/daemon/http_listener.h"

#include <spdlog/spdlog.h>

#include "core/net/http.h"

namespace pgfleet::daemon {

std::optional<int> HttpListener::Bind(const Flags& flags) {
  const std::string& listen = flags.common().listen;
  auto colon = listen.rfind(':');
  if (colon == std::string::npos)
    return flags.Usage("--listen must be HOST:PORT (got \"" + listen + "\")");
  host_ = listen.substr(0, colon);
  try {
    port_ = std::stoi(listen.substr(colon + 1));
  } catch (const std::exception&) {
    return flags.Usage("--listen port must be a number (got \"" + listen + "\")");
  }
  const net::TlsFiles& tls = flags.common().tls;
  if (!tls.cert.empty()) {
    auto ssl = std::make_unique<httplib::SSLServer>(tls.cert.c_str(), tls.key.c_str(),
                                                    tls.ca.empty() ? nullptr : tls.ca.c_str());
    if (!ssl->is_valid()) {
      return flags.Usage("--tls-cert " + tls.cert + " and --tls-key " + tls.key +
                         (tls.ca.empty() ? "" : " (with --tls-ca " + tls.ca + ")") +
                         " do not make a TLS server: not PEM, or the key does not match");
    }
    server_ = std::move(ssl);
    tls_ = true;
  }
  net::PrepareServer(*server_);
  guard_.Install(*server_);
  if (port_ == 0)
    port_ = server_->bind_to_any_port(host_);
  else if (!server_->bind_to_port(host_, port_))
    port_ = -1;
  if (port_ < 0) {
    spdlog::error("{} cannot listen on {}", flags.info().program, listen);
    return 1;
  }
  return std::nullopt;
}

void HttpListener::Serve(const metrics::Registry& metrics, const std::string& who) {
  net::AddHealthAndMetrics(*server_, metrics, who);
  guard_.Start(port_);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

void HttpListener::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
  guard_.Stop();
}

}  // namespace pgfleet::daemon
