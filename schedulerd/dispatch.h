#pragma once
// Delivering decisions to hosts, after the transaction that made them commits:
// assignments (POST /v1/jobs, one request per host) and stop requests
// (POST /v1/jobs/ID/stop).
//
// What must hold: only committed assignments are ever dispatched, so a host
// never runs a job the database does not say is its. A dispatch the host
// refused or never received is recorded (pgfleet.dispatch_failed puts the jobs
// back to pending and suspends the host). A dispatch the host may have
// received but did not answer in time (an overloaded host) is not: requeueing
// it would run those jobs twice, on two hosts, as two attempts. They stay
// assigned, hostd's reconcile starts any that did not arrive, and the host is
// suspended (pgfleet.dispatch_unanswered). A failed stop is only logged, since
// hostd's reconcile stops the job anyway.
//
// Who waits for whom: the scheduler loop hands each pass's committed
// assignments over (Submit) and goes on to its next pass at once; a host
// takes about a millisecond to answer (it starts the jobs first), and a job
// inserted meanwhile must not wait for that answer to be placed. Delivery
// threads (kDeliverers) send them, and record the outcomes on the
// dispatcher's own database connection. Everything submitted is delivered
// before the dispatcher is destroyed. Stops are read by the loop, on its work
// connection, outside any formation transaction, and sent by StopForwarder's
// threads (ForwardStops).
//
// How it is sent: a fixed number of sender threads (kSenders) work through
// the hosts of a pass, over keep-alive connections kept between passes
// (net::ClientPool), so a pass to 1,000 hosts is neither 1,000 threads nor
// 1,000 TCP handshakes.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "core/db/connection.h"
#include "core/db/deadline.h"
#include "core/metrics/metrics.h"
#include "core/net/client_pool.h"
#include "core/util/mutex.h"
#include "schedulerd/stop_forwarder.h"

namespace pgfleet::schedulerd {

// One assignment to deliver to a host after commit.
struct Dispatch {
  int64_t job_id = 0;
  int attempt = 0;
  std::string spec;         // the job spec, JSON text (store::Assignment::spec)
  std::string uid;          // jobs.uid, sent as the item's "uid" when not empty
  bool privileged = false;  // jobs.privileged, signed into its ticket
};

// Everything one host is sent in one request.
struct HostTarget {
  std::string api_url;
  std::string ticket_key;  // the host's (pgfleet.host_keys): each job's ticket is signed with it
  // hosts.suspensions as the pass saw it: a host that takes its batch has it
  // reset (pgfleet.dispatch_succeeded) only when it was not 0.
  int suspensions = 0;
  std::vector<Dispatch> jobs;
};

// Host id -> what to send it.
using Targets = std::map<std::string, HostTarget>;

// Most bytes of one POST /v1/jobs body: well under what hostd accepts
// (net::kMaxBodyBytes, 1 MiB). A host's batch is split into as many requests
// as it takes; a job spec's own limits (model::kMaxEnvBytes, ...) keep any
// single job far below it.
inline constexpr size_t kMaxDispatchBytes = 768 * 1024;

// The request bodies for the target's jobs, in order, each at most max_bytes
// unless a single job alone is bigger; `first[i]` is the index of body i's
// first job. Each job carries a dispatch ticket for host_id, signed with the
// target's key and valid from `now` (unix seconds) for net::kTicketSeconds.
std::vector<std::string> DispatchBodies(const std::string& host_id, const HostTarget& target,
                                        int64_t now, size_t max_bytes, std::vector<size_t>* first);

// How one job's dispatch went.
struct Delivery {
  enum class Kind {
    kTaken,       // the host answered 200
    kFailed,      // certainly not started: refused, or never reached the host
    kUnanswered,  // the request went out but no answer came: maybe started
  };
  Kind kind = Kind::kTaken;
  std::string error;  // unless kTaken
};

// What an HTTP result means for the jobs it carried.
Delivery DeliveryOf(const httplib::Result& res, const std::string& api_url);

// How long one unit of the scheduler's database work (a formation's pass,
// recording a dispatch, the maintenance steps) may wait for an answer before
// the connection is dropped and made again (core/db/deadline.h).
inline constexpr std::chrono::milliseconds kDbDeadline{10000};

class Dispatcher {
 public:
  // dsn: the database, for the connection outcomes are recorded on (its
  // statements prepared by store::PrepareDispatchOutcomes); token: the cluster token for
  // hostd's API; timeout_seconds: per request, stretched for big batches.
  // metrics must outlive the dispatcher. Each statement recording outcomes
  // must be answered within kDbDeadline (core/db/deadline.h; who, e.g.
  // "scheduler=s1", names the connections in log lines).
  Dispatcher(std::string dsn, std::string token, int timeout_seconds, metrics::Registry& metrics,
             std::string who);
  // Delivers everything submitted (each request bounded by its timeout), then
  // stops the delivery threads.
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Hands over committed assignments: a delivery thread sends each host its
  // batch, then records the outcomes (one statement per host that did not
  // take its batch; one for those that took it after failing before, which
  // resets their backoff). Returns at once, unless
  // kMaxWaiting submissions are already waiting for a delivery thread.
  void Submit(Targets targets);
  // Asks hosts to stop the jobs whose desired state is stop: one statement
  // on conn, then the requests go to StopForwarder's per-host senders
  // (returns at once; a silent host delays only its own stops).
  void ForwardStops(pqxx::connection& conn);
  const StopForwarder& stops() const { return stops_; }

 private:
  // Sends every host its batch and records the outcomes (errors recording
  // them are logged, not thrown).
  void Deliver(const Targets& targets);
  // POSTs one host's batch, in bodies of at most kMaxDispatchBytes. Returns
  // how each job's body went.
  std::vector<Delivery> Send(const std::string& host_id, const HostTarget& target);
  // What became of one host's batch.
  struct Outcome {
    const std::string* host;
    const HostTarget* target;
    std::vector<Dispatch> failed;  // the jobs certainly not started (refused, never sent)
    std::string error;             // why, for them
    size_t unanswered = 0;         // jobs sent whose answer never came
    std::string unanswered_error;
  };
  static Outcome OutcomeOf(const std::string& host, const HostTarget& target,
                           const std::vector<Delivery>& deliveries);
  // Records outcomes that change a row (not taken, or taken by a host that
  // had failed before) on record_conn_ (record_mu_ held).
  void Record(pqxx::connection& conn, const std::vector<Outcome>& outcomes);
  void RecordFailure(pqxx::connection& conn, const std::string& host,
                     const std::vector<Dispatch>& failed, const std::string& error);
  void RecordUnanswered(pqxx::connection& conn, const std::string& host, size_t jobs,
                        const std::string& error);
  // A delivery thread: takes submissions until closing_ and none is left.
  void Deliverer();

  int timeout_seconds_;
  metrics::Registry& metrics_;
  std::string who_;
  net::ClientPool pool_;
  StopForwarder stops_;  // uses pool_

  util::Mutex record_mu_;
  db::ReconnectingConnection record_conn_ GUARDED_BY(record_mu_);

  util::Mutex mu_;
  util::CondVar submitted_;  // a submission waits, or closing_
  util::CondVar taken_;      // a submission was taken
  std::deque<Targets> waiting_ GUARDED_BY(mu_);
  bool closing_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> deliverers_;
};

}  // namespace pgfleet::schedulerd
