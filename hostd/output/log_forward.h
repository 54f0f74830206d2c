#pragma once
// Forwarding a job's output, line by line, to where a fleet's operators
// already look (hostd --log-forward): journald (its native protocol, through
// libsystemd's sd_journal_sendv) or a syslog server (RFC 5424 messages over
// UDP, RFC 5426). Every line carries the job id, attempt, formation and host
// as fields (journald: PGFLEET_JOB_ID, PGFLEET_ATTEMPT, PGFLEET_FORMATION,
// PGFLEET_HOST_ID; syslog: the structured element [pgfleet@32473 job=...
// attempt=... formation=... host=...]).
//
// The job's shim forwards, since it reads every byte of the output anyway
// (shim.h): its copier thread hands lines to a LineForwarder, whose own
// sender thread sends them. What must hold: a slow, stuck or absent receiver
// never slows the job or its output files. The queue between the two
// threads is bounded; lines that do not fit are dropped, counted, and the
// stream says so where they are missing ("pgfleet: N lines of output were
// not forwarded ..."). The output files stay complete either way.
//
// A line is what ends with '\n' (which is not sent); longer than
// kMaxForwardedLine bytes, it goes in pieces of that size; output that ends
// without a newline is sent as a last line when the job's output ends.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace pgfleet::hostd {

inline constexpr size_t kMaxForwardedLine = 8192;
// Bytes of lines waiting for the sender at most; beyond it lines are dropped.
inline constexpr size_t kForwardQueueBytes = 4u << 20;

struct LogForwardTarget {
  enum class Kind { kNone, kJournald, kSyslog };
  Kind kind = Kind::kNone;
  std::string host;  // syslog: name or address
  int port = 0;      // syslog: 1-65535
};

// "" (off), "journald" or "syslog://HOST:PORT" (HOST a name, an IPv4 address
// or an IPv6 address in brackets). Throws std::invalid_argument naming
// --log-forward, the value and the rule.
LogForwardTarget ParseLogForward(const std::string& text);

// What every forwarded line says about where it came from.
struct LineOrigin {
  int64_t job_id = 0;
  int attempt = 0;
  std::string formation;
  std::string host_id;
};

// Sends one line; implemented per target in log_forward.cpp.
class LineSink {
 public:
  virtual ~LineSink() = default;
  // False when the line was not delivered (the receiver refused it).
  virtual bool Send(std::string_view line) = 0;
};

// RFC 5424 text of one line (exposed for tests): priority user.info,
// timestamp in UTC with microseconds, `hostname`, app name pgfleet-job,
// the pgfleet@32473 structured element, then the line as is.
std::string SyslogMessage(const LineOrigin& origin, const std::string& hostname,
                          std::string_view line, int64_t unix_micros);

class LineForwarder {
 public:
  // Makes the sink for target (a syslog host name is resolved here; one that
  // does not resolve is logged and its lines dropped) and starts the sender
  // thread, which waits without holding any lock until lines come (the
  // shim's driver may clone() meanwhile).
  LineForwarder(const LogForwardTarget& target, LineOrigin origin);
  // Any sink (tests).
  explicit LineForwarder(std::unique_ptr<LineSink> sink);
  ~LineForwarder();  // Finish(0)
  LineForwarder(const LineForwarder&) = delete;
  LineForwarder& operator=(const LineForwarder&) = delete;

  // Splits output into lines and queues them; never blocks on the sender.
  void Feed(const char* data, size_t size);
  // Queues the last unterminated line, then waits up to `wait` for the
  // sender to send everything queued, and stops it. Lines still queued after
  // that are dropped (counted). Safe to call more than once and while Feed
  // runs on another thread (later output is dropped).
  void Finish(std::chrono::milliseconds wait);

  uint64_t sent() const;
  uint64_t dropped() const;  // not queued (full), not sent in time, or refused

 private:
  // Everything the sender thread touches: shared with it, so a sender stuck
  // in a send that blocks (a full socket buffer) may outlive this object.
  struct State;
  std::shared_ptr<State> s_;
};

}  // namespace pgfleet::hostd
