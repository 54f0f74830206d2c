#pragma once
// A host's API as a client reaches it: a base URL may carry a path prefix,
// because hollow hosts (hostd/hollow/hollow.h) share one listener and each serves
// its API under /hosts/<id>. The scheduler and the CLI call
//   ep.client->Post(ep.prefix + "/v1/jobs", ...)
// for a real host (prefix "") and a hollow one alike.

#include <httplib.h>

#include <memory>
#include <string>

namespace pgfleet::net {

struct Endpoint {
  std::unique_ptr<httplib::Client> client;  // for http://host:port, token and timeouts set
  std::string prefix;                       // "" or "/path" (no trailing slash)
};

// Splits a host's API base URL http://host[:port][/path] into its origin
// ("http://host:port") and path prefix ("" or "/path", no trailing slash).
// Throws std::invalid_argument naming the URL when it is not of that form.
struct BaseUrl {
  std::string origin;
  std::string prefix;
};
BaseUrl SplitBaseUrl(const std::string& base_url);

// Accepts http://host[:port][/path] (a trailing slash is dropped; no query
// or fragment). Throws std::invalid_argument naming the URL otherwise.
Endpoint MakeEndpoint(const std::string& base_url, const std::string& token,
                      int timeout_seconds = 5);

}  // namespace pgfleet::net
