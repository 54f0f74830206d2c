#include "cli/ui/change_feed.h"

#include <spdlog/spdlog.h>

namespace pgfleet::cli::ui {

ChangeFeed::ChangeFeed(UiStore& store, int max_clients) : store_(store), max_clients_(max_clients) {}

void ChangeFeed::Start() { poller_ = std::thread([this] { Poll(); }); }

void ChangeFeed::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (poller_.joinable()) poller_.join();
}

void ChangeFeed::Poll() {
  std::string last;
  auto next_tick = std::chrono::steady_clock::now() + kTickEvery;
  while (true) {
    std::string now;
    try {
      now = store_.Fingerprint();
    } catch (const std::exception& e) {
      spdlog::warn("pgfleet ui: cannot ask the database for changes: {}", e.what());
    }
    {
      std::unique_lock lock(mu_);
      bool changed = !now.empty() && now != last;
      if (changed) {
        last = now;
        ++changes_;
      }
      if (std::chrono::steady_clock::now() >= next_tick) {
        ++ticks_;
        next_tick += kTickEvery;
      }
      wake_.notify_all();
      if (wake_.wait_for(lock, kPollEvery, [this] { return stopping_; })) return;
    }
  }
}

void ChangeFeed::Handle(const httplib::Request&, httplib::Response& res) {
  if (clients_.fetch_add(1) >= max_clients_) {
    clients_.fetch_sub(1);
    res.status = 503;
    res.set_content("{\"error\":\"too many open event streams (at most " +
                        std::to_string(max_clients_) + ")\"}",
                    "application/json");
    return;
  }
  res.set_header("Cache-Control", "no-store");
  uint64_t seen_changes, seen_ticks;
  {
    std::lock_guard lock(mu_);
    seen_changes = changes_;
    seen_ticks = ticks_;
  }
  // Each answer chunk: one event, or a comment every 15 s so a dropped peer
  // is noticed (the write fails) and proxies keep the stream open.
  auto first = std::make_shared<bool>(true);
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, seen_changes, seen_ticks, first](size_t, httplib::DataSink& sink) mutable {
        std::string out;
        if (*first) {
          *first = false;
          out = "retry: 2000\nevent: hello\ndata: {}\n\n";
        } else {
          std::unique_lock lock(mu_);
          wake_.wait_for(lock, std::chrono::seconds(15), [&] {
            return stopping_ || changes_ != seen_changes || ticks_ != seen_ticks;
          });
          if (stopping_) {
            lock.unlock();
            sink.done();
            return true;
          }
          if (changes_ != seen_changes) {
            out = "event: changed\ndata: " + std::to_string(changes_) + "\n\n";
          } else if (ticks_ != seen_ticks) {
            out = "event: tick\ndata: " + std::to_string(ticks_) + "\n\n";
          } else {
            out = ": keepalive\n\n";
          }
          seen_changes = changes_;
          seen_ticks = ticks_;
        }
        return sink.write(out.data(), out.size());
      },
      [this](bool) { clients_.fetch_sub(1); });
}

}  // namespace pgfleet::cli::ui
