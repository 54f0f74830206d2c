#include "core/net/endpoint.h"

#include <regex>
#include <stdexcept>

#include "core/net/http.h"

namespace pgfleet::net {

BaseUrl SplitBaseUrl(const std::string& base_url) {
  static const std::regex url_re(R"(^(https?://[^/\s:?#]+(:\d+)?)(/[^\s?#]*)?$)");
  std::smatch m;
  if (!std::regex_match(base_url, m, url_re)) {
    throw std::invalid_argument("api_url must look like http[s]://host:port[/path] (got \"" +
                                base_url + "\")");
  }
  BaseUrl out{m[1].str(), m[3].str()};
  while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  return out;
}

Endpoint MakeEndpoint(const std::string& base_url, const std::string& token, int timeout_seconds) {
  auto [origin, prefix] = SplitBaseUrl(base_url);
  Endpoint ep;
  ep.prefix = prefix;
  ep.client = MakeClient(origin, token, timeout_seconds);
  return ep;
}

}  // namespace pgfleet::net
