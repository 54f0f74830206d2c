#include "cli/host_logs.h"

#include <iostream>

#include "core/net/endpoint.h"
#include "core/net/http.h"

namespace pgfleet::cli {

bool StreamHostLogs(const std::string& api_url, const std::string& token, int64_t job, int attempt,
                    bool follow, int tail) {
  if (token.empty() || api_url.empty()) return false;
  try {
    auto ep = net::MakeEndpoint(api_url, token, 5);
    auto& client = ep.client;
    client->set_read_timeout(30, 0);
    std::string path =
        ep.prefix + "/v1/jobs/" + std::to_string(job) + "/logs?attempt=" + std::to_string(attempt);
    if (follow) path += "&follow=1";
    if (tail >= 0) path += "&tail=" + std::to_string(tail);
    int status = 0;
    auto res = client->Get(
        path.c_str(),
        [&](const httplib::Response& r) {
          status = r.status;
          return r.status == 200;
        },
        [&](const char* data, size_t len) {
          std::cout.write(data, static_cast<std::streamsize>(len));
          std::cout.flush();
          return true;
        });
    return res && status == 200;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace pgfleet::cli
