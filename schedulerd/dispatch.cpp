#include "schedulerd/dispatch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "core/hostapi/hostapi.h"
#include "core/net/ticket.h"
#include "core/util/mutex.h"
#include "schedulerd/store.h"

namespace pgfleet::schedulerd {

using nlohmann::json;

namespace {

// Sender threads per pass: requests in flight at once, over all hosts.
constexpr int kSenders = 16;
// Keep-alive connections per origin (a real host, or one hollow-host
// listener): hostd serves one connection per listener thread.
constexpr int kConnectionsPerOrigin = 8;
// Submissions delivered at once: a job placed while an earlier pass's batch
// is still starting on its host goes out without waiting for that answer.
constexpr int kDeliverers = 4;
// Submissions that may wait for a delivery thread before Submit waits too:
// the loop must not run far ahead of hosts that answer slowly.
constexpr size_t kMaxWaiting = 64;

}  // namespace

Dispatcher::Dispatcher(std::string dsn, std::string token, int timeout_seconds,
                       metrics::Registry& metrics, std::string who)
    : timeout_seconds_(timeout_seconds),
      metrics_(metrics),
      who_(std::move(who)),
      pool_(std::move(token), net::ClientPool::Options{kConnectionsPerOrigin}),
      stops_(pool_, timeout_seconds, metrics),
      record_conn_(std::move(dsn), "dispatch connection") {
  record_conn_.SetOnConnect(store::PrepareDispatchOutcomes);
  for (int i = 0; i < kDeliverers; ++i) deliverers_.emplace_back([this] { Deliverer(); });
}

Dispatcher::~Dispatcher() {
  {
    util::MutexLock lock(mu_);
    closing_ = true;
  }
  submitted_.notify_all();
  for (auto& t : deliverers_) t.join();
}

void Dispatcher::Submit(Targets targets) {
  bool any = false;
  for (const auto& [host, target] : targets) any = any || !target.jobs.empty();
  if (!any) return;
  {
    util::MutexLock lock(mu_);
    taken_.wait(lock, [this] {
      mu_.AssertHeld();
      return waiting_.size() < kMaxWaiting;
    });
    waiting_.push_back(std::move(targets));
  }
  submitted_.notify_one();
}

void Dispatcher::Deliverer() {
  for (;;) {
    Targets targets;
    {
      util::MutexLock lock(mu_);
      submitted_.wait(lock, [this] {
        mu_.AssertHeld();
        return closing_ || !waiting_.empty();
      });
      if (waiting_.empty()) return;  // closing, and everything delivered
      targets = std::move(waiting_.front());
      waiting_.pop_front();
    }
    taken_.notify_one();
    try {
      Deliver(targets);
    } catch (const std::exception& e) {  // e.g. no thread to be had: the jobs stay assigned
      metrics_.Add("pgfleet_scheduler_errors_total", 1);
      spdlog::error("{}: delivering a pass's assignments failed: {}", who_, e.what());
    }
  }
}

std::vector<std::string> DispatchBodies(const std::string& host_id, const HostTarget& target,
                                        int64_t now, size_t max_bytes, std::vector<size_t>* first) {
  std::vector<hostapi::OutgoingJob> out;
  out.reserve(target.jobs.size());
  for (const Dispatch& d : target.jobs) {
    hostapi::OutgoingJob o{d.job_id, d.attempt, d.spec, d.uid, ""};
    // A host without a key gets no ticket and refuses the job (400): it goes back to pending.
    if (net::IsTicketKey(target.ticket_key)) {
      o.ticket = net::SignTicket({net::TicketKind::kDispatch, host_id, d.job_id, d.attempt,
                                  d.privileged, now + net::kTicketSeconds, ""},
                                 target.ticket_key);
    }
    out.push_back(std::move(o));
  }
  return hostapi::EncodeDispatch(out, max_bytes, first);
}

Delivery DeliveryOf(const httplib::Result& res, const std::string& api_url) {
  using Kind = Delivery::Kind;
  if (res) {
    if (res->status == 200) return {Kind::kTaken, ""};
    return {Kind::kFailed, "HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, 200)};
  }
  std::string error = "no answer from " + api_url + ": " + httplib::to_string(res.error());
  switch (res.error()) {
    // Nothing reached hostd, or not all of the body: it started nothing.
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout:
    case httplib::Error::BindIPAddress:
    case httplib::Error::Write:
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification:
      return {Kind::kFailed, error};
    // Read (the answer timed out or was cut), and anything unforeseen.
    default:
      return {Kind::kUnanswered, error};
  }
}

std::vector<Delivery> Dispatcher::Send(const std::string& host_id, const HostTarget& target) {
  std::vector<Delivery> outcomes(target.jobs.size());
  std::vector<size_t> first;
  auto bodies = DispatchBodies(host_id, target, net::UnixNow(), kMaxDispatchBytes, &first);
  for (size_t b = 0; b < bodies.size(); ++b) {
    size_t begin = first[b], end = b + 1 < first.size() ? first[b + 1] : target.jobs.size();
    // Starting jobs takes the host a few ms each: allow for big batches.
    int timeout = timeout_seconds_ + static_cast<int>((end - begin) / 50);
    Delivery outcome;
    try {
      outcome = DeliveryOf(pool_.Post(target.api_url, hostapi::kJobsPath, bodies[b], timeout),
                           target.api_url);
    } catch (const std::exception& e) {  // a bad api_url: nothing was sent
      outcome = {Delivery::Kind::kFailed, e.what()};
    }
    for (size_t i = begin; i < end; ++i) outcomes[i] = outcome;
  }
  return outcomes;
}

void Dispatcher::RecordFailure(pqxx::connection& conn, const std::string& host,
                               const std::vector<Dispatch>& failed, const std::string& error) {
  metrics_.Add("pgfleet_scheduler_dispatch_failures_total", 1);
  std::vector<store::DispatchedJob> jobs;
  jobs.reserve(failed.size());
  for (const auto& d : failed) jobs.push_back({d.job_id, d.attempt});
  pqxx::nontransaction tx(conn);  // one statement (a function): atomic on its own
  int n = store::DispatchFailed(tx, host, jobs, error);
  spdlog::warn("host={} dispatch failed, {} jobs back to pending, host suspended: {}", host, n,
               error);
}

void Dispatcher::RecordUnanswered(pqxx::connection& conn, const std::string& host, size_t jobs,
                                  const std::string& error) {
  metrics_.Add("pgfleet_scheduler_dispatches_unanswered_total", 1);
  pqxx::nontransaction tx(conn);
  store::DispatchUnanswered(tx, host);
  spdlog::warn(
      "host={} dispatch unanswered, {} jobs left assigned (hostd's reconcile starts any it did not "
      "get), host suspended: {}",
      host, jobs, error);
}

Dispatcher::Outcome Dispatcher::OutcomeOf(const std::string& host, const HostTarget& target,
                                          const std::vector<Delivery>& deliveries) {
  // Jobs whose body was refused or never sent go back; jobs whose body went
  // unanswered stay assigned; the rest were delivered.
  Outcome o{&host, &target, {}, "", 0, ""};
  for (size_t k = 0; k < deliveries.size(); ++k) {
    const Delivery& d = deliveries[k];
    if (d.kind == Delivery::Kind::kFailed) {
      o.failed.push_back(target.jobs[k]);
      o.error = d.error;
    } else if (d.kind == Delivery::Kind::kUnanswered) {
      ++o.unanswered;
      o.unanswered_error = d.error;
    }
  }
  return o;
}

void Dispatcher::Deliver(const Targets& targets) {
  std::vector<std::pair<const std::string*, const HostTarget*>> todo;
  for (const auto& [host, target] : targets) {
    if (!target.jobs.empty()) todo.emplace_back(&host, &target);
  }
  std::vector<std::vector<Delivery>> deliveries(todo.size());  // per host, per job
  std::atomic<size_t> next{0};
  auto sender = [&] {
    for (size_t i = next++; i < todo.size(); i = next++) {
      const auto started = std::chrono::steady_clock::now();
      try {
        deliveries[i] = Send(*todo[i].first, *todo[i].second);
      } catch (const std::exception& e) {  // unforeseen: maybe sent, so not requeued
        deliveries[i].assign(todo[i].second->jobs.size(), {Delivery::Kind::kUnanswered, e.what()});
      }
      // One host's batch, sent and answered (or given up on).
      metrics_.Observe(
          "pgfleet_scheduler_dispatch_seconds",
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
  };
  std::vector<std::thread> threads;
  int n = std::min<int>(kSenders, static_cast<int>(todo.size()));
  for (int k = 1; k < n; ++k) threads.emplace_back(sender);
  sender();  // this thread is one of the senders
  for (auto& t : threads) t.join();

  // Every host was answered or gave up: only now does the database wait on
  // us, and only for what changes a row (a host that did not take its batch,
  // or took it after failing before). The connection is opened when first
  // needed.
  std::vector<Outcome> to_record;
  for (size_t i = 0; i < todo.size(); ++i) {
    Outcome o = OutcomeOf(*todo[i].first, *todo[i].second, deliveries[i]);
    bool taken = o.failed.empty() && o.unanswered == 0;
    if (taken) metrics_.Add("pgfleet_scheduler_dispatches_total", 1);
    if (!taken || o.target->suspensions != 0) to_record.push_back(std::move(o));
  }
  if (to_record.empty()) return;
  util::MutexLock lock(record_mu_);
  pqxx::connection* conn = record_conn_.Get();
  if (!conn) {
    // Jobs that were not taken stay assigned: hostd's reconcile starts them,
    // or the host is swept as lost and they go back to pending.
    metrics_.Add("pgfleet_scheduler_errors_total", 1);
    spdlog::error("{}: database unreachable, outcomes of dispatches to {} hosts not recorded", who_,
                  to_record.size());
    return;
  }
  try {
    Record(*conn, to_record);
  } catch (const pqxx::broken_connection& e) {
    record_conn_.MarkBroken(e.what());
    metrics_.Add("pgfleet_scheduler_errors_total", 1);
  } catch (const std::exception& e) {
    metrics_.Add("pgfleet_scheduler_errors_total", 1);
    spdlog::error("{}: recording dispatch outcomes failed: {}", who_, e.what());
    if (!conn->is_open()) record_conn_.MarkBroken(e.what());
  }
}

void Dispatcher::Record(pqxx::connection& conn, const std::vector<Outcome>& outcomes) {
  db::Deadline deadline(conn, kDbDeadline, who_ + " dispatch connection");
  std::vector<std::string> recovered;  // took their batch after failing before
  for (const Outcome& o : outcomes) {
    deadline.Renew();
    if (!o.failed.empty()) {
      RecordFailure(conn, *o.host, o.failed, o.error);  // suspends the host too
    } else if (o.unanswered > 0) {
      RecordUnanswered(conn, *o.host, o.unanswered, o.unanswered_error);
    } else {
      recovered.push_back(*o.host);
    }
  }
  if (!recovered.empty()) {
    pqxx::nontransaction tx(conn);  // one statement: no BEGIN and COMMIT round trips
    store::DispatchSucceeded(tx, recovered);
  }
}

void Dispatcher::ForwardStops(pqxx::connection& conn) {
  std::vector<store::StopToForward> stops;
  {
    db::Deadline deadline(conn, kDbDeadline, who_ + " work connection");
    pqxx::nontransaction tx(conn);  // one statement: no BEGIN and COMMIT round trips
    stops = store::StopsToForward(tx);
  }
  stops_.Forward(stops, std::chrono::steady_clock::now());
}

}  // namespace pgfleet::schedulerd
