#pragma once
// Live updates for the dashboard's pages: one thread per server asks the
// database once a second whether anything changed (ui_fingerprint: the
// newest job event, the hosts' states) and wakes every page's event stream
// (GET /api/events, server-sent events) with a "changed" event when it did,
// or a "tick" every kTickEvery (heartbeat ages and usage move without
// events). The database is asked once a second whatever the number of pages;
// at most max_clients streams are open at once.
//
// Why polling and not LISTEN: no NOTIFY fires on every job state change (the
// job channel fires only for watched jobs, the work channel only when a
// scheduler sleeps), and adding one would put a statement on the jobs' hot
// path for every job whether a dashboard runs or not.
//
// What must hold: Stop() ends the poller and every open stream promptly.

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "cli/ui/ui_store.h"

namespace pgfleet::cli::ui {

class ChangeFeed {
 public:
  static constexpr auto kPollEvery = std::chrono::seconds(1);
  static constexpr auto kTickEvery = std::chrono::seconds(5);

  ChangeFeed(UiStore& store, int max_clients);
  ~ChangeFeed() { Stop(); }
  ChangeFeed(const ChangeFeed&) = delete;
  ChangeFeed& operator=(const ChangeFeed&) = delete;

  void Start();
  void Stop();

  // Serves GET /api/events: 503 when max_clients streams are open.
  void Handle(const httplib::Request& req, httplib::Response& res);

  int clients() const { return clients_.load(); }

 private:
  void Poll();

  UiStore& store_;
  const int max_clients_;
  std::atomic<int> clients_{0};
  std::mutex mu_;
  std::condition_variable wake_;
  uint64_t changes_ = 0;  // bumped on each change
  uint64_t ticks_ = 0;    // bumped every kTickEvery
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace pgfleet::cli::ui
