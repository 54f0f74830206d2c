// pgfleet ui: the web dashboard (docs/dashboard.md). Serves the page and its
// JSON API on --listen (loopback unless told otherwise) until SIGINT or
// SIGTERM, reading the database as the --db login: what that login may see
// (row-level security) is what the page shows. It has no authentication of
// its own.

#include <pthread.h>

#include <csignal>
#include <iostream>

#include "cli/command.h"
#include "cli/ui/change_feed.h"
#include "cli/ui/routes.h"
#include "cli/ui/ui_store.h"
#include "core/db/connection.h"
#include "core/net/http.h"

namespace pgfleet::cli {

namespace {

constexpr const char* kDefaultListen = "127.0.0.1:7780";

// HOST:PORT (HOST may be [v6]); throws UsageError.
std::pair<std::string, int> ParseListen(const std::string& listen) {
  auto colon = listen.rfind(':');
  std::string rule = "--listen must be HOST:PORT with PORT 0-65535 (got \"" + listen + "\")";
  if (colon == std::string::npos || colon == 0) throw UsageError(rule);
  std::string host = listen.substr(0, colon), port = listen.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(rule);
  int p = std::stoi(port);
  if (p > 65535) throw UsageError(rule);
  return {host, p};
}

}  // namespace

int CmdUi(const std::vector<std::string>& args) {
  std::string listen = kDefaultListen;
  int max_streams = 32;
  Command cmd("pgfleet ui [--listen HOST:PORT] [--max-streams N]", kText);
  cmd.Options()("listen", po::value(&listen),
                "where to serve the dashboard (default 127.0.0.1:7780; port 0 picks one); "
                "it has no login of its own: anyone who reaches it sees what the --db login sees")(
      "max-streams", po::value(&max_streams),
      "most pages receiving live updates at once (1-1000, default 32)");
  if (!cmd.Parse(args)) return kExitOk;
  auto [host, port] = ParseListen(listen);
  if (max_streams < 1 || max_streams > 1000)
    throw UsageError("--max-streams must be from 1 to 1000 (got " + std::to_string(max_streams) + ")");

  ui::UiStore store(db::ResolveDsn(cmd.DbFlag()), 4);
  store.Check();  // a bad DSN or login fails now, not on the first page
  ui::ChangeFeed feed(store, max_streams);

  // SIGINT and SIGTERM are taken by sigwait below, in no other thread.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  httplib::Server server;
  net::PrepareServer(server);
  // Every open event stream holds a thread; the rest serve requests.
  int threads = max_streams + 8;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_read_timeout(5, 0);
  server.set_keep_alive_timeout(2);
  server.set_payload_max_length(4096);
  ui::InstallRoutes(server, store, feed);
  int bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    std::cerr << "pgfleet ui: cannot listen on " << listen << "\n";
    return kExitFailure;
  }
  std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  std::cout << "pgfleet ui: serving http://" << shown << ":" << bound << "/" << std::endl;
  feed.Start();
  std::thread serving([&server] { server.listen_after_bind(); });
  int sig = 0;
  sigwait(&stop, &sig);
  feed.Stop();  // ends the open streams first: server.stop() waits for them
  server.stop();
  serving.join();
  return kExitOk;
}

}  // namespace pgfleet::cli
