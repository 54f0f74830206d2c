#include "hostd/output/log_forward.h"

#include <fmt/format.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <deque>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "core/util/mutex.h"

namespace pgfleet::hostd {
namespace {

[[noreturn]] void Refuse(const std::string& text, const std::string& rule) {
  throw std::invalid_argument(fmt::format("--log-forward {} (got '{}')", rule, text));
}

// Printable ASCII without spaces, as RFC 5424 wants its header fields.
std::string HeaderField(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c > 32 && c < 127) ? c : '_';
  return out.empty() ? "-" : out;
}

// An SD-PARAM value: '"', '\' and ']' escaped with '\'.
std::string ParamValue(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\' || c == ']') out += '\\';
    out += c;
  }
  return out;
}

class JournaldSink : public LineSink {
 public:
  explicit JournaldSink(const LineOrigin& o)
      : fields_{"PRIORITY=6",
                "SYSLOG_IDENTIFIER=pgfleet-job",
                "PGFLEET_JOB_ID=" + std::to_string(o.job_id),
                "PGFLEET_ATTEMPT=" + std::to_string(o.attempt),
                "PGFLEET_FORMATION=" + o.formation,
                "PGFLEET_HOST_ID=" + o.host_id} {}

  bool Send(std::string_view line) override {
    std::string message = "MESSAGE=";
    message.append(line);
    std::vector<iovec> iov;
    iov.push_back({message.data(), message.size()});
    for (auto& f : fields_) iov.push_back({f.data(), f.size()});
    int r = sd_journal_sendv(iov.data(), static_cast<int>(iov.size()));
    if (r < 0 && !warned_) {
      warned_ = true;
      spdlog::warn("log forwarding to journald failed: {} (is systemd-journald running?)",
                   std::strerror(-r));
    }
    return r >= 0;
  }

 private:
  std::vector<std::string> fields_;
  bool warned_ = false;
};

class SyslogSink : public LineSink {
 public:
  SyslogSink(const LogForwardTarget& t, LineOrigin origin) : origin_(std::move(origin)) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    hostname_ = name;
    addrinfo hints{};
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* found = nullptr;
    int r = getaddrinfo(t.host.c_str(), std::to_string(t.port).c_str(), &hints, &found);
    if (r != 0) {
      spdlog::warn("log forwarding: cannot resolve syslog host {}: {}", t.host, gai_strerror(r));
      return;
    }
    for (addrinfo* a = found; a && fd_ < 0; a = a->ai_next) {
      fd_ = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd_ >= 0 && connect(fd_, a->ai_addr, a->ai_addrlen) != 0) {
        close(fd_);
        fd_ = -1;
      }
    }
    freeaddrinfo(found);
    if (fd_ < 0) spdlog::warn("log forwarding: no usable address for {}:{}", t.host, t.port);
  }
  ~SyslogSink() override {
    if (fd_ >= 0) close(fd_);
  }

  bool Send(std::string_view line) override {
    if (fd_ < 0) return false;
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    std::string m =
        SyslogMessage(origin_, hostname_, line, int64_t{now.tv_sec} * 1000000 + now.tv_nsec / 1000);
    bool retried = false;
    while (true) {
      if (send(fd_, m.data(), m.size(), MSG_NOSIGNAL) >= 0) return true;
      if (errno == EINTR) continue;
      // A refused datagram (nobody listening then) is reported on the next
      // send: not this line's failure, so this one is sent once more.
      if (errno == ECONNREFUSED && !retried) {
        retried = true;
        continue;
      }
      return false;
    }
  }

 private:
  LineOrigin origin_;
  std::string hostname_;
  int fd_ = -1;
};

}  // namespace

LogForwardTarget ParseLogForward(const std::string& text) {
  LogForwardTarget t;
  if (text.empty()) return t;
  if (text == "journald") {
    t.kind = LogForwardTarget::Kind::kJournald;
    return t;
  }
  const std::string scheme = "syslog://";
  if (text.rfind(scheme, 0) != 0) Refuse(text, "must be journald or syslog://HOST:PORT");
  std::string rest = text.substr(scheme.size());
  size_t colon;
  if (!rest.empty() && rest[0] == '[') {
    size_t close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      Refuse(text, "needs an IPv6 address as [ADDRESS]:PORT");
    t.host = rest.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = rest.rfind(':');
    if (colon == std::string::npos) Refuse(text, "needs a port: syslog://HOST:PORT");
    t.host = rest.substr(0, colon);
  }
  if (t.host.empty()) Refuse(text, "needs a host: syslog://HOST:PORT");
  for (char c : t.host) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':'))
      Refuse(text, "host may hold only letters, digits, '.', '-' (or an [IPv6] address)");
  }
  std::string port = rest.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    Refuse(text, "port must be a number from 1 to 65535");
  t.port = std::stoi(port);
  if (t.port < 1 || t.port > 65535) Refuse(text, "port must be a number from 1 to 65535");
  t.kind = LogForwardTarget::Kind::kSyslog;
  return t;
}

std::string SyslogMessage(const LineOrigin& o, const std::string& hostname, std::string_view line,
                          int64_t unix_micros) {
  time_t secs = static_cast<time_t>(unix_micros / 1000000);
  tm utc{};
  gmtime_r(&secs, &utc);
  char stamp[40];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
  // <14>: facility user (1) x 8 + severity informational (6). No PROCID or
  // MSGID ("-"): the job's output is one stream.
  std::string m = fmt::format(
      "<14>1 {}.{:06d}Z {} pgfleet-job - - [pgfleet@32473 job=\"{}\" attempt=\"{}\" "
      "formation=\"{}\" host=\"{}\"] ",
      stamp, unix_micros % 1000000, HeaderField(hostname, 255), o.job_id, o.attempt,
      ParamValue(o.formation), ParamValue(o.host_id));
  m.append(line);
  return m;
}

struct LineForwarder::State {
  explicit State(std::unique_ptr<LineSink> s) : sink(std::move(s)) {}
  void QueueLocked(std::string line) REQUIRES(mu);
  void TellGapLocked() REQUIRES(mu);
  void SenderLoop();

  const std::unique_ptr<LineSink> sink;  // the sender thread's alone
  util::Mutex mu;
  util::CondVar wake;     // the sender: lines or stop
  util::CondVar drained;  // Finish: the queue is empty
  std::string partial GUARDED_BY(mu);  // output after the last newline
  struct Entry {
    std::string text;
    bool notice = false;  // ours, about lost lines: not counted as sent
  };
  std::deque<Entry> queue GUARDED_BY(mu);
  size_t queued_bytes GUARDED_BY(mu) = 0;
  uint64_t gap GUARDED_BY(mu) = 0;  // lines dropped since the last one queued
  bool sending GUARDED_BY(mu) = false;  // the sender holds a line
  bool stop GUARDED_BY(mu) = false;
  bool finished GUARDED_BY(mu) = false;
  uint64_t sent GUARDED_BY(mu) = 0;
  uint64_t dropped GUARDED_BY(mu) = 0;
};

LineForwarder::LineForwarder(const LogForwardTarget& target, LineOrigin origin)
    : LineForwarder(target.kind == LogForwardTarget::Kind::kJournald
                        ? std::unique_ptr<LineSink>(std::make_unique<JournaldSink>(origin))
                        : std::unique_ptr<LineSink>(
                              std::make_unique<SyslogSink>(target, std::move(origin)))) {}

LineForwarder::LineForwarder(std::unique_ptr<LineSink> sink)
    : s_(std::make_shared<State>(std::move(sink))) {
  std::thread([s = s_] { s->SenderLoop(); }).detach();
}

LineForwarder::~LineForwarder() { Finish(std::chrono::milliseconds(0)); }

void LineForwarder::State::QueueLocked(std::string line) {
  if (finished || queued_bytes + line.size() > kForwardQueueBytes) {
    ++dropped;
    ++gap;
    return;
  }
  TellGapLocked();
  queued_bytes += line.size();
  queue.push_back({std::move(line), false});
  wake.notify_one();
}

// Where lines were lost, the stream says so (the notice may exceed the cap).
void LineForwarder::State::TellGapLocked() {
  if (gap == 0) return;
  queue.push_back({fmt::format("pgfleet: {} lines of output were not forwarded (the receiver "
                               "fell behind); the job's output files have them",
                               gap),
                   true});
  gap = 0;
  wake.notify_one();
}

void LineForwarder::Feed(const char* data, size_t size) {
  State& s = *s_;
  util::MutexLock lock(s.mu);
  std::string_view in(data, size);
  while (!in.empty()) {
    size_t nl = in.find('\n');
    std::string_view piece = in.substr(0, nl);
    size_t room = kMaxForwardedLine - s.partial.size();
    if (piece.size() > room || (piece.size() == room && nl == std::string_view::npos)) {
      // Longer than one message: send what fills one, the rest follows.
      s.partial.append(piece.substr(0, room));
      s.QueueLocked(std::move(s.partial));
      s.partial.clear();
      in.remove_prefix(room);
      continue;
    }
    s.partial.append(piece);
    if (nl == std::string_view::npos) break;
    s.QueueLocked(std::move(s.partial));
    s.partial.clear();
    in.remove_prefix(nl + 1);
  }
}

void LineForwarder::Finish(std::chrono::milliseconds wait) {
  State& s = *s_;
  util::MutexLock lock(s.mu);
  if (s.finished) return;
  if (!s.partial.empty()) s.QueueLocked(std::move(s.partial));
  s.partial.clear();
  s.TellGapLocked();
  s.finished = true;
  s.drained.wait_for(lock, wait, [&s] { s.mu.AssertHeld(); return s.queue.empty() && !s.sending; });
  for (const auto& e : s.queue) s.dropped += e.notice ? 0 : 1;
  s.queue.clear();
  s.queued_bytes = 0;
  s.stop = true;
  s.wake.notify_one();
}

void LineForwarder::State::SenderLoop() {
  util::MutexLock lock(mu);
  while (true) {
    wake.wait(lock, [this] { mu.AssertHeld(); return stop || !queue.empty(); });
    if (stop) return;
    Entry e = std::move(queue.front());
    queue.pop_front();
    if (!e.notice) queued_bytes -= e.text.size();
    sending = true;
    lock.unlock();
    bool ok = sink->Send(e.text);
    lock.lock();
    sending = false;
    if (!e.notice) ok ? ++sent : ++dropped;
    if (queue.empty()) drained.notify_all();
  }
}

uint64_t LineForwarder::sent() const {
  util::MutexLock lock(s_->mu);
  return s_->sent;
}

uint64_t LineForwarder::dropped() const {
  util::MutexLock lock(s_->mu);
  return s_->dropped;
}

}  // namespace pgfleet::hostd
