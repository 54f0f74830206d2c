#pragma once
// The dashboard (pgfleet ui) as a process of the test, against a
// OneHostClusterTest's database: started on a free loopback port with a DSN
// of the test's choosing (so row-level security applies as for that login),
// asked over HTTP, stopped at destruction.

#include <httplib.h>

#include <memory>
#include <string>
#include <vector>

#include "test_support.h"

namespace pgfleet::testing {

class UiProcess {
 public:
  // Starts `pgfleet ui --listen 127.0.0.1:0 --db dsn extra...` and waits until
  // it says where it serves; port() is 0 when it did not within 20 s.
  UiProcess(const std::string& dsn, const std::string& log_path,
            std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {BinaryPath("pgfleet"), "ui", "--listen", "127.0.0.1:0",
                                     "--db", dsn};
    argv.insert(argv.end(), extra.begin(), extra.end());
    process_ = std::make_unique<Process>(argv, log_path);
    const std::string marker = "serving http://127.0.0.1:";
    WaitFor(
        [&] {
          std::string log = process_->Log();
          auto at = log.find(marker);
          if (at == std::string::npos) return false;
          port_ = std::atoi(log.c_str() + at + marker.size());
          return port_ > 0;
        },
        std::chrono::seconds(20));
  }

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }
  Process& process() { return *process_; }
  std::unique_ptr<httplib::Client> Client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(10, 0);
    return c;
  }
  // GET path: status (0 when no answer) and body.
  std::pair<int, std::string> Get(const std::string& path) const {
    auto res = Client()->Get(path.c_str());
    if (!res) return {0, ""};
    return {res->status, res->body};
  }

 private:
  std::unique_ptr<Process> process_;
  int port_ = 0;
};

}  // namespace pgfleet::testing
