#pragma once
// Reading an attempt's output from the host that ran it (hostd's
// GET /v1/jobs/{id}/logs), for `pgfleet logs` and `pgfleet run --wait`.
// The database keeps only the last 4 KiB of a finished attempt; the host
// keeps it all, for as long as it keeps the attempt's directory.

#include <cstdint>
#include <functional>
#include <string>

namespace pgfleet::cli {

struct LogStream {
  bool ended = false;   // the host sent the whole log (with follow: the attempt ended)
  uint64_t bytes = 0;   // bytes copied to stdout
  std::string refused;  // the host answered with an error: its message
};

// How the host lets us read: a log ticket (pgfleet.log_ticket) for each
// request, asked of the database; the cluster token, when one was given, if
// the database gives no ticket.
struct LogAccess {
  std::string token;
  // A fresh ticket for the attempt; "" when the database gave none (*why says why).
  std::function<std::string(std::string* why)> ticket;
};

// Copies the attempt's output to stdout as it arrives; with follow, until the
// attempt ends on the host, however long it stays quiet: a stream that breaks
// off (a read timeout, a dropped connection) is resumed from the last byte,
// until the host has not answered for kGiveUpAfter. tail >= 0 asks for the
// last `tail` lines only. Not ended: the host could not be asked or stopped
// answering (no token or ticket, no API URL, unreachable, a status other than
// 200); output already copied stays printed.
LogStream StreamHostLogs(const std::string& api_url, const LogAccess& access, int64_t job,
                         int attempt, bool follow, int tail);

}  // namespace pgfleet::cli
