#include "core/net/endpoint.h"

#include <regex>
#include <stdexcept>

#include "core/net/http.h"

namespace pgfleet::net {

Endpoint MakeEndpoint(const std::string& base_url, const std::string& token, int timeout_seconds) {
  static const std::regex url_re(R"(^(http://[^/\s:?#]+(:\d+)?)(/[^\s?#]*)?$)");
  std::smatch m;
  if (!std::regex_match(base_url, m, url_re)) {
    throw std::invalid_argument("api_url must look like http://host:port[/path] (got \"" +
                                base_url + "\")");
  }
  Endpoint ep;
  ep.prefix = m[3].str();
  while (!ep.prefix.empty() && ep.prefix.back() == '/') ep.prefix.pop_back();
  ep.client = MakeClient(m[1].str(), token, timeout_seconds);
  return ep;
}

}  // namespace pgfleet::net
