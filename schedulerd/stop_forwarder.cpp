#include "schedulerd/stop_forwarder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "core/hostapi/hostapi.h"
#include "core/net/ticket.h"
#include "core/util/backoff.h"
#include "core/util/mutex.h"

namespace pgfleet::schedulerd {
namespace {

constexpr std::chrono::milliseconds kFirstRetry{1000};
constexpr std::chrono::milliseconds kMaxRetry{30000};

}  // namespace

StopForwarder::StopForwarder(net::ClientPool& pool, int timeout_seconds, metrics::Registry& metrics)
    : pool_(pool), timeout_seconds_(timeout_seconds), metrics_(metrics) {}

StopForwarder::~StopForwarder() {
  util::MutexLock lock(mu_);
  for (auto& [host, queue] : queues_) queue.stops.clear();  // what waits is not sent at exit
  idle_.wait(lock, [&] { mu_.AssertHeld(); return senders_ == 0; });
}

int64_t StopForwarder::sent() const {
  util::MutexLock lock(mu_);
  return posted_;
}

void StopForwarder::Forward(const std::vector<store::StopToForward>& stops, Clock::time_point now) {
  util::MutexLock lock(mu_);
  std::set<std::pair<int64_t, int>> wanted;
  for (const auto& s : stops) {
    auto key = std::make_pair(s.job_id, s.attempt);
    wanted.insert(key);
    auto it = sent_.find(key);
    if (it != sent_.end() && it->second.queued) {
      // Still waiting to be sent: made a force stop in place if it became one.
      if (s.force && !it->second.force) {
        it->second.force = true;
        for (auto& q : queues_[s.host_id].stops) {
          if (q.job_id == s.job_id && q.attempt == s.attempt) q.force = true;
        }
      }
      continue;
    }
    // Sent already and waiting out its backoff, unless it turned into a force stop.
    if (it != sent_.end() && now < it->second.next_try && (it->second.force || !s.force)) continue;
    Sent& sent = sent_[key];
    sent.force = s.force;
    sent.queued = true;
    HostQueue& queue = queues_[s.host_id];
    queue.stops.push_back(s);
    if (!queue.sending) {
      queue.sending = true;
      ++senders_;
      std::thread([this, host = s.host_id] { Sender(host); }).detach();
    }
  }
  for (auto it = sent_.begin(); it != sent_.end();) {
    it = wanted.count(it->first) ? std::next(it) : sent_.erase(it);
  }
}

void StopForwarder::Sender(const std::string& host) {
  while (true) {
    store::StopToForward s;
    {
      util::MutexLock lock(mu_);
      HostQueue& queue = queues_[host];
      if (queue.stops.empty()) {
        queues_.erase(host);
        --senders_;
        idle_.notify_all();
        return;
      }
      s = queue.stops.front();
      queue.stops.pop_front();
      ++posted_;
      auto it = sent_.find({s.job_id, s.attempt});
      if (it != sent_.end()) {  // (forgotten meanwhile: no longer wanted)
        Sent& sent = it->second;
        sent.queued = false;
        sent.tries = std::min(sent.tries + 1, 16);
        sent.next_try = Clock::now() + util::DoublingDelay(kFirstRetry, kMaxRetry, sent.tries - 1);
      }
    }
    Post(s);
  }
}

void StopForwarder::Post(const store::StopToForward& s) {
  std::string path = hostapi::StopPath(s.job_id, s.attempt, s.force);
  try {
    httplib::Headers headers;
    if (net::IsTicketKey(s.ticket_key)) {
      headers.emplace(net::kTicketHeader,
                      net::SignTicket({net::TicketKind::kStop, s.host_id, s.job_id, s.attempt,
                                       false, net::UnixNow() + net::kTicketSeconds, ""},
                                      s.ticket_key));
    }
    auto res = pool_.Post(s.api_url, path, "", timeout_seconds_, headers);
    metrics_.Add("pgfleet_scheduler_stops_forwarded_total", 1);
    if (!res || res->status >= 300) {
      spdlog::warn("job={} attempt={} host={}: stop not delivered (hostd's reconcile will stop it)",
                   s.job_id, s.attempt, s.host_id);
    }
  } catch (const std::exception& e) {
    spdlog::warn("job={} stop: {}", s.job_id, e.what());
  }
}

}  // namespace pgfleet::schedulerd
