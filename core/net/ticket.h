#pragma once
// Host tickets: what lets a caller start, stop or read one attempt on one
// host, signed with that host's own key (HMAC-SHA256, 32 random bytes that
// hostd makes once and registers in pgfleet.host_keys).
//
// Who signs: the scheduler (dispatch and stop tickets, from the keys it reads
// with its host snapshot) and the database (logs, fs and exec tickets:
// pgfleet.host_ticket, which checks that the caller may see into the job
// first, and signs with the same HMAC in SQL). Who checks: hostd, without the database. A ticket
// names its host, job, attempt, whether the job is privileged and when it expires; a host takes
// only tickets for itself, unexpired, each once (ReplayGuard).
//
// Text form (host ids have no ':'):
//   v1:<kind>:<host>:<job>:<attempt>:<privileged 0|1>:<expires, unix s>:<nonce>:<hmac hex>
// The HMAC covers everything before its ':'.

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/util/mutex.h"

namespace pgfleet::net {

// logs: read an attempt's output; fs: read its sandbox's files (pgfleet fs);
// exec: run a command in its namespaces (pgfleet exec).
enum class TicketKind { kDispatch, kStop, kLogs, kFs, kExec };
const char* ToString(TicketKind kind);

struct Ticket {
  TicketKind kind = TicketKind::kDispatch;
  std::string host;
  int64_t job = 0;
  int attempt = 0;
  bool privileged = false;
  int64_t expires = 0;  // unix seconds
  std::string nonce;    // 16 hex digits
};

// How long a ticket the scheduler signs stays valid: enough for a slow
// dispatch and for clocks a little apart, short enough that a stolen one
// is soon worthless.
inline constexpr int64_t kTicketSeconds = 60;

// The header that carries a stop or logs ticket (a dispatch carries one per job, in its body).
inline constexpr const char* kTicketHeader = "X-Pgfleet-Ticket";
// Names the exec session whose stdin a request carries (hostd/api/api_exec.cpp):
// the session's name is the capability, as a ticket is.
inline constexpr const char* kExecSessionHeader = "X-Pgfleet-Exec-Session";

// A new host key: 32 random bytes as 64 lowercase hex digits.
std::string NewTicketKey();
// True when key is 64 hex digits.
bool IsTicketKey(const std::string& key);

// The key kept in the file at `path` (mode 0600), made there first if the
// file does not exist. Throws std::runtime_error naming the file when it
// cannot be read or made, or does not hold a key.
std::string LoadOrCreateKeyFile(const std::string& path);

// HMAC-SHA256 of message under the key's bytes (key: 64 hex digits), as hex.
std::string HmacSha256Hex(const std::string& key_hex, const std::string& message);

// The ticket's text, signed with key_hex; t.nonce is made when empty.
std::string SignTicket(Ticket t, const std::string& key_hex);

// Reads and checks a ticket for this host: well-formed, signed with key_hex
// (compared in constant time), of `kind`, for `host`, not expired at `now`
// (unix seconds). Returns it, or nullopt with *why saying which rule failed.
std::optional<Ticket> VerifyTicket(const std::string& text, const std::string& key_hex,
                                   TicketKind kind, const std::string& host, int64_t now,
                                   std::string* why);

// Remembers the tickets a host took until they expire, so none is taken twice.
class ReplayGuard {
 public:
  // In memory only (hollow hosts, tests).
  ReplayGuard() = default;
  // Also in `journal` (a file of hostd's data dir: one "nonce expiry" line
  // appended per ticket taken, compacted now and then), read back first: a
  // ticket taken before a restart stays taken after it. A journal that cannot
  // be written leaves the guard in memory only; `journal_ok()` says so.
  ReplayGuard(std::string journal, int64_t now);
  ~ReplayGuard();
  ReplayGuard(const ReplayGuard&) = delete;
  ReplayGuard& operator=(const ReplayGuard&) = delete;
  // True the first time `t` is seen (and remembers it); false after.
  bool FirstUse(const Ticket& t, int64_t now);
  bool journal_ok() const;

 private:
  void Prune(int64_t now) REQUIRES(mu_);
  void Compact() REQUIRES(mu_);  // the journal rewritten with what is remembered
  mutable util::Mutex mu_;
  std::unordered_map<std::string, int64_t> seen_ GUARDED_BY(mu_);  // nonce -> expiry
  int64_t next_prune_ GUARDED_BY(mu_) = 0;
  std::string journal_;
  int fd_ = -1;
  size_t journal_lines_ = 0;
  bool journal_ok_ = true;
};

// Unix seconds now.
int64_t UnixNow();

}  // namespace pgfleet::net
