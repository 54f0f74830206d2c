#include "core/db/deadline.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <atomic>
#include <map>
#include <thread>
#include <utility>

#include "core/util/mutex.h"

namespace pgfleet::db {
namespace {

using Clock = std::chrono::steady_clock;

struct Armed {
  int fd;
  Clock::time_point at;
  std::chrono::milliseconds limit;
  std::string who;
};

// The armed deadlines and the one thread that fires them. Created on first
// use and never destroyed: the thread may still run while the process exits.
class Watchdog {
 public:
  static Watchdog& Get() {
    static Watchdog* w = new Watchdog();
    return *w;
  }

  uint64_t Arm(int fd, std::chrono::milliseconds limit, std::string who) {
    util::MutexLock lock(mu_);
    uint64_t id = ++last_id_;
    auto at = Clock::now() + limit;
    armed_.emplace(id, Armed{fd, at, limit, std::move(who)});
    if (!thread_started_) {
      thread_started_ = true;
      std::thread([this] { Loop(); }).detach();
    }
    // Most work ends long before its deadline: wake the thread only when
    // this one is due before the time it sleeps until.
    if (at < wake_at_) cv_.notify_one();
    return id;
  }

  void Renew(uint64_t id) {
    util::MutexLock lock(mu_);
    auto it = armed_.find(id);
    if (it != armed_.end()) it->second.at = Clock::now() + it->second.limit;
  }

  // After it returns the socket is never shut down by this entry: firing
  // happens under the same lock.
  void Disarm(uint64_t id) {
    util::MutexLock lock(mu_);
    armed_.erase(id);
  }

  std::atomic<int64_t> fired{0};

 private:
  void Loop() {
    util::MutexLock lock(mu_);
    for (;;) {
      Clock::time_point next = Clock::time_point::max();
      auto now = Clock::now();
      for (auto it = armed_.begin(); it != armed_.end();) {
        if (it->second.at <= now) {
          Fire(it->second);
          it = armed_.erase(it);
        } else {
          next = std::min(next, it->second.at);
          ++it;
        }
      }
      wake_at_ = next;
      if (next == Clock::time_point::max()) {
        cv_.wait(lock);
      } else {
        cv_.wait_until(lock, next);
      }
    }
  }

  void Fire(const Armed& a) {
    ++fired;
    spdlog::error(
        "{}: the database has not answered for {:.1f} s (its backend may be stopped or "
        "stuck): dropping the connection to reconnect",
        a.who, std::chrono::duration<double>(a.limit).count());
    shutdown(a.fd, SHUT_RDWR);
  }

  util::Mutex mu_;
  util::CondVar cv_;
  std::map<uint64_t, Armed> armed_ GUARDED_BY(mu_);
  uint64_t last_id_ GUARDED_BY(mu_) = 0;
  bool thread_started_ GUARDED_BY(mu_) = false;
  // when the thread wakes next
  Clock::time_point wake_at_ GUARDED_BY(mu_) = Clock::time_point::min();
};

}  // namespace

Deadline::Deadline(pqxx::connection_base& conn, std::chrono::milliseconds limit, std::string who)
    : id_(0) {
  int fd = conn.sock();
  if (fd >= 0) id_ = Watchdog::Get().Arm(fd, limit, std::move(who));
}

Deadline::~Deadline() {
  if (id_ != 0) Watchdog::Get().Disarm(id_);
}

void Deadline::Renew() {
  if (id_ != 0) Watchdog::Get().Renew(id_);
}

int64_t Deadline::Fired() { return Watchdog::Get().fired.load(); }

void ShutDownSocket(pqxx::connection_base& conn) {
  if (int fd = conn.sock(); fd >= 0) shutdown(fd, SHUT_RDWR);
}

}  // namespace pgfleet::db
