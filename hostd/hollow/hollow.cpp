#include "hostd/hollow/hollow.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/db/connection.h"
#include "core/net/http.h"
#include "core/net/ticket.h"
#include "core/util/mutex.h"
#include "hostd/agent/agent.h"
#include "hostd/api/api.h"
#include "hostd/health/health_monitor.h"
#include "hostd/hollow/sim.h"
#include "hostd/supervisor/supervisor.h"

namespace pgfleet::hostd {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// How long a worker sleeps at most: how soon it notices `stop`.
constexpr auto kWorkerTick = 250ms;
constexpr auto kRetryDelay = 200ms;

struct HollowHost {
  std::unique_ptr<Agent> agent;
  std::unique_ptr<Supervisor> supervisor;
  Clock::time_point next_step;  // its worker's alone
};

// One database connection and the agents stepped over it, on one thread.
class Worker {
 public:
  Worker(const std::string& dsn, int index, std::chrono::milliseconds heartbeat_interval)
      : conn_(dsn, "hollow hosts connection " + std::to_string(index)) {
    conn_.SetOnConnect(store::Prepare);
    conn_.SetMaxBackoff(heartbeat_interval);  // as hostd's (Agent)
  }
  void Add(HollowHost* host) { hosts_.push_back(host); }
  // Called by an agent with work (from any thread).
  void Wake() {
    {
      util::MutexLock lock(mu_);
      woken_ = true;
    }
    cv_.notify_one();
  }
  void Run(const std::atomic<bool>& stop) {
    while (!stop) {
      pqxx::connection* conn = conn_.Get();
      auto next = Clock::now() + kWorkerTick;
      if (!conn) {
        for (auto* h : hosts_) h->agent->NoteStepFailed(nullptr);
        next = Clock::now() + kRetryDelay;
      } else {
        if (conn_.TakeReconnected()) {
          for (auto* h : hosts_) h->agent->NoteReconnected();
        }
        next = std::min(next, StepAll(*conn));
      }
      util::MutexLock lock(mu_);
      cv_.wait_until(lock, next, [&] { mu_.AssertHeld(); return woken_ || stop; });
      woken_ = false;
    }
    if (pqxx::connection* conn = conn_.Get()) {
      for (auto* h : hosts_) h->agent->FinalFlush(*conn);
    }
  }

 private:
  // Steps every agent that is due or has work; returns the earliest next step.
  Clock::time_point StepAll(pqxx::connection& conn) {
    auto now = Clock::now();
    auto next = Clock::time_point::max();
    for (auto* h : hosts_) {
      if (h->agent->TakeWake() || now >= h->next_step) {
        try {
          h->next_step = h->agent->Step(conn);
        } catch (const pqxx::broken_connection& e) {
          for (auto* each : hosts_) each->agent->NoteStepFailed(nullptr);
          conn_.MarkBroken(e.what());
          return Clock::now() + kRetryDelay;
        } catch (const std::exception& e) {
          h->agent->NoteStepFailed(&e);
          h->next_step = Clock::now() + kRetryDelay;
          if (!conn.is_open()) {
            conn_.MarkBroken(e.what());
            return h->next_step;
          }
        }
      }
      next = std::min(next, h->next_step);
    }
    return next;
  }

  db::ReconnectingConnection conn_;
  std::vector<HollowHost*> hosts_;  // fixed before Run
  util::Mutex mu_;
  util::CondVar cv_;
  bool woken_ GUARDED_BY(mu_) = false;
};

// Binds `listen` (HOST:PORT, port 0 = any); returns the bound port, or -1.
int Bind(httplib::Server& server, const std::string& listen, std::string* host) {
  auto colon = listen.rfind(':');
  *host = listen.substr(0, colon);
  int port = std::stoi(listen.substr(colon + 1));
  net::PrepareServer(server);
  if (port == 0) return server.bind_to_any_port(*host);
  return server.bind_to_port(*host, port) ? port : -1;
}

HostConfig ConfigOf(const HollowOptions& o, const std::string& id, const std::string& advertise) {
  HostConfig c;
  c.id = id;
  c.dsn = o.dsn;
  c.api_url = advertise + kHostsPathPrefix + id;
  c.cpu = o.cpu;
  c.memory = o.memory;
  c.labels = o.labels;
  c.driver = kSimDriver;
  c.driver_note = "hollow host: one of " + std::to_string(o.hosts) +
                  " simulated by one pgfleet-hostd process; its jobs run no process";
  c.heartbeat_interval = o.heartbeat_interval;
  c.usage_interval = o.usage_interval;
  c.reconcile_interval = o.reconcile_interval;
  c.self_fence = o.self_fence;
  c.shim_fence = false;
  c.host_ttl = o.host_ttl;
  c.ticket_key = net::NewTicketKey();  // a new one each run: registering replaces the old
  return c;                            // data_dir empty: no lease file
}

}  // namespace

void CheckHollowOptions(const HollowOptions& o) {
  auto fail = [](const std::string& what) { throw std::invalid_argument(what); };
  if (o.hosts < 1) fail("--simulate must be >= 1 (got " + std::to_string(o.hosts) + ")");
  if (o.db_connections < 1) {
    fail("--db-connections must be >= 1 (got " + std::to_string(o.db_connections) + ")");
  }
  if (o.http_threads < 1) fail("http_threads must be >= 1");
  if (o.cpu <= 0) fail("--cpu must be > 0 (got " + std::to_string(o.cpu) + ")");
  if (o.memory <= 0) fail("--memory must be > 0 (got " + std::to_string(o.memory) + ")");
  if (o.heartbeat_interval.count() <= 0) fail("--heartbeat-interval must be > 0");
  if (o.reconcile_interval.count() <= 0) fail("--reconcile-interval must be > 0");
  if (o.host_ttl <= o.heartbeat_interval) fail("--host-ttl must be > --heartbeat-interval");
  auto colon = o.listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == o.listen.size() ||
      o.listen.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    fail("--listen must be HOST:PORT (got \"" + o.listen + "\")");
  }
}

int RunHollowHosts(const HollowOptions& o, metrics::Registry& metrics,
                   const std::atomic<bool>& stop) {
  CheckHollowOptions(o);
  httplib::Server server;
  // Slow and numerous clients are bounded as on a real host; the pool gets
  // a thread per admitted connection (at least http_threads).
  net::ConnectionLimits limits;
  limits.max_connections = std::max(limits.max_connections, o.http_threads);
  net::ConnectionGuard guard(limits);
  guard.Install(server);
  std::string lhost;
  int port = Bind(server, o.listen, &lhost);
  if (port < 0) {
    spdlog::error("hollow hosts cannot listen on {}", o.listen);
    return 1;
  }
  std::string advertise =
      o.advertise.empty() ? "http://" + lhost + ":" + std::to_string(port) : o.advertise;
  while (!advertise.empty() && advertise.back() == '/') advertise.pop_back();

  std::vector<std::unique_ptr<Worker>> workers;
  for (int k = 0; k < std::min(o.db_connections, o.hosts); ++k) {
    workers.push_back(std::make_unique<Worker>(o.dsn, k + 1, o.heartbeat_interval));
  }
  std::vector<HollowHost> hosts(static_cast<size_t>(o.hosts));
  std::map<std::string, HostHandle> handles;
  const auto start = Clock::now();
  for (int i = 0; i < o.hosts; ++i) {
    std::string id = o.id_prefix + std::to_string(i + 1);
    HollowHost& h = hosts[static_cast<size_t>(i)];
    Worker* worker = workers[static_cast<size_t>(i) % workers.size()].get();
    h.agent = std::make_unique<Agent>(ConfigOf(o, id, advertise), metrics);
    SupervisorOptions so;
    so.host_id = id;
    so.driver = kSimDriver;
    so.keep_finished = o.keep_finished;
    Agent* agent = h.agent.get();
    h.supervisor = std::make_unique<Supervisor>(
        so, [agent](model::Report r) { agent->Enqueue(std::move(r)); },
        std::make_unique<SimRunner>());
    h.agent->SetSupervisor(h.supervisor.get());
    h.agent->SetWaker([worker] { worker->Wake(); });
    h.agent->BeginLease();
    // First steps (registrations, then heartbeats) spread over one interval.
    h.next_step = start + o.heartbeat_interval * i / o.hosts;
    worker->Add(&h);
    handles[id] = HostHandle{h.supervisor.get(), h.agent.get()};
  }
  // Every host's health checks on one thread (sim checks are instant).
  std::vector<Supervisor*> supervisors;
  for (auto& h : hosts) supervisors.push_back(h.supervisor.get());
  health::HealthMonitor health_checks(supervisors, std::make_shared<SimProber>());
  health_checks.Start();
  net::AddHealthAndMetrics(server, metrics,
                           o.id_prefix + "1.." + o.id_prefix + std::to_string(o.hosts));
  InstallHostsApi(server, handles, o.token, metrics, &guard);
  guard.Start(port);
  std::thread http([&server] { server.listen_after_bind(); });
  spdlog::info("{} hollow hosts {}1..{}{} on {} database connection(s); API {}{}<id>", o.hosts,
               o.id_prefix, o.id_prefix, o.hosts, workers.size(), advertise, kHostsPathPrefix);

  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w, &stop] { w->Run(stop); });
  if (o.self_fence) {
    threads.emplace_back([&hosts, &stop] {
      while (!stop) {
        std::this_thread::sleep_for(100ms);
        for (auto& h : hosts) h.agent->WatchdogTick();
      }
    });
  }
  for (auto& t : threads) t.join();
  server.stop();
  http.join();
  spdlog::info("{} hollow hosts stopped", o.hosts);
  return 0;
}

}  // namespace pgfleet::hostd
