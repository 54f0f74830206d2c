#include "core/net/ticket.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "core/util/mutex.h"

namespace pgfleet::net {

namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string ToHex(const unsigned char* p, size_t n) {
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHex[p[i] >> 4];
    out[2 * i + 1] = kHex[p[i] & 15];
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(bytes)) != 1) {
    throw std::runtime_error("no random bytes from OpenSSL (RAND_bytes failed)");
  }
  return ToHex(buf.data(), bytes);
}

bool IsHex(const std::string& s) {
  for (char c : s) {
    if (HexDigit(c) < 0) return false;
  }
  return true;
}

// A whole decimal number of at most `digits` digits, no sign.
bool ParseCount(const std::string& s, size_t digits, int64_t* out) {
  if (s.empty() || s.size() > digits) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

std::optional<TicketKind> KindOf(const std::string& s) {
  if (s == "dispatch") return TicketKind::kDispatch;
  if (s == "stop") return TicketKind::kStop;
  if (s == "logs") return TicketKind::kLogs;
  if (s == "fs") return TicketKind::kFs;
  if (s == "exec") return TicketKind::kExec;
  return std::nullopt;
}

std::string Payload(const Ticket& t) {
  return std::string("v1:") + ToString(t.kind) + ":" + t.host + ":" + std::to_string(t.job) + ":" +
         std::to_string(t.attempt) + ":" + (t.privileged ? "1" : "0") + ":" +
         std::to_string(t.expires) + ":" + t.nonce;
}

}  // namespace

const char* ToString(TicketKind kind) {
  switch (kind) {
    case TicketKind::kDispatch:
      return "dispatch";
    case TicketKind::kStop:
      return "stop";
    case TicketKind::kLogs:
      return "logs";
    case TicketKind::kFs:
      return "fs";
    case TicketKind::kExec:
      return "exec";
  }
  return "dispatch";
}

std::string NewTicketKey() { return RandomHex(32); }

bool IsTicketKey(const std::string& key) { return key.size() == 64 && IsHex(key); }

std::string LoadOrCreateKeyFile(const std::string& path) {
  auto fail = [&path](const std::string& what) {
    throw std::runtime_error("ticket key file " + path + ": " + what);
  };
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    std::string key = NewTicketKey();
    fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) fail(std::string("cannot be made: ") + std::strerror(errno));
    std::string line = key + "\n";
    bool ok =
        write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
    int err = errno;
    close(fd);
    if (!ok) {
      unlink(path.c_str());
      fail(std::string("cannot be written: ") + std::strerror(err));
    }
    return key;
  }
  if (fd < 0) fail(std::string("cannot be read: ") + std::strerror(errno));
  char buf[128];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  std::string key(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!key.empty() && (key.back() == '\n' || key.back() == ' ')) key.pop_back();
  if (!IsTicketKey(key)) fail("does not hold a key (64 hex digits); remove it to make a new one");
  return key;
}

std::string HmacSha256Hex(const std::string& key_hex, const std::string& message) {
  if (!IsTicketKey(key_hex)) throw std::invalid_argument("a ticket key must be 64 hex digits");
  unsigned char key[32];
  for (size_t i = 0; i < 32; ++i) {
    key[i] =
        static_cast<unsigned char>(HexDigit(key_hex[2 * i]) * 16 + HexDigit(key_hex[2 * i + 1]));
  }
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key, sizeof key, reinterpret_cast<const unsigned char*>(message.data()),
            message.size(), mac, &len)) {
    OPENSSL_cleanse(key, sizeof key);
    throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
  }
  OPENSSL_cleanse(key, sizeof key);
  return ToHex(mac, len);
}

std::string SignTicket(Ticket t, const std::string& key_hex) {
  if (t.nonce.empty()) t.nonce = RandomHex(8);
  std::string payload = Payload(t);
  return payload + ":" + HmacSha256Hex(key_hex, payload);
}

std::optional<Ticket> VerifyTicket(const std::string& text, const std::string& key_hex,
                                   TicketKind kind, const std::string& host, int64_t now,
                                   std::string* why) {
  auto fail = [why](const std::string& w) -> std::optional<Ticket> {
    *why = w;
    return std::nullopt;
  };
  if (text.empty()) return fail("no ticket");
  if (text.size() > 400) return fail("ticket longer than 400 characters");
  std::vector<std::string> f;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ':') {
      f.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  if (f.size() != 9 || f[0] != "v1") return fail("ticket is not of the form v1:kind:host:...:hmac");
  auto k = KindOf(f[1]);
  int64_t job = 0, attempt = 0, expires = 0;
  if (!k || !ParseCount(f[3], 19, &job) || job <= 0 || !ParseCount(f[4], 10, &attempt) ||
      attempt <= 0 || attempt > INT32_MAX || (f[5] != "0" && f[5] != "1") ||
      !ParseCount(f[6], 19, &expires) || f[7].size() != 16 || !IsHex(f[7]) || f[8].size() != 64 ||
      !IsHex(f[8])) {
    return fail("ticket is malformed");
  }
  if (!IsTicketKey(key_hex)) return fail("this host has no ticket key");
  std::string payload = text.substr(0, text.size() - 65);
  std::string want = HmacSha256Hex(key_hex, payload);
  std::string got = f[8];
  for (auto& c : got) c = static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
  if (CRYPTO_memcmp(want.data(), got.data(), want.size()) != 0) {
    return fail("ticket signature does not match this host's key");
  }
  Ticket t;
  t.kind = *k;
  t.host = f[2];
  t.job = job;
  t.attempt = static_cast<int>(attempt);
  t.privileged = f[5] == "1";
  t.expires = expires;
  t.nonce = f[7];
  if (t.kind != kind) {
    return fail(std::string("ticket is for ") + ToString(t.kind) + ", not " + ToString(kind));
  }
  if (t.host != host)
    return fail("ticket is for host " + t.host + ", not this host (" + host + ")");
  if (t.expires < now) {
    return fail("ticket expired " + std::to_string(now - t.expires) +
                " s ago (are the clocks of this host and the scheduler or database apart?)");
  }
  return t;
}

namespace {

// The most of a journal read back (far more than a host takes in a ticket's life).
constexpr size_t kMaxJournalBytes = 64 << 20;

bool IsNonce(const std::string& s) {
  return !s.empty() && s.size() <= 64 &&
         s.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
}

}  // namespace

ReplayGuard::ReplayGuard(std::string journal, int64_t now) : journal_(std::move(journal)) {
  // Read back what earlier runs took (hostd's own file; a line that is not
  // a nonce and an expiry, or a cut last line, is skipped).
  int in = open(journal_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in >= 0) {
    std::string text;
    char buf[65536];
    ssize_t n;
    while (text.size() < kMaxJournalBytes && (n = read(in, buf, sizeof buf)) > 0) {
      text.append(buf, static_cast<size_t>(n));
    }
    close(in);
    size_t start = 0;
    for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string line = text.substr(start, nl - start);
      size_t sp = line.find(' ');
      if (sp == std::string::npos || !IsNonce(line.substr(0, sp))) continue;
      std::string when = line.substr(sp + 1);
      if (when.empty() || when.size() > 18 || when.find_first_not_of("0123456789") != std::string::npos)
        continue;
      int64_t expires = std::stoll(when);
      if (expires >= now) seen_[line.substr(0, sp)] = expires;
    }
  }
  Compact();
}

ReplayGuard::~ReplayGuard() {
  if (fd_ >= 0) close(fd_);
}

bool ReplayGuard::journal_ok() const {
  util::MutexLock lock(mu_);
  return journal_ok_;
}

void ReplayGuard::Compact() {
  if (journal_.empty()) return;
  std::string text;
  for (const auto& [nonce, expires] : seen_) text += nonce + " " + std::to_string(expires) + "\n";
  const std::string tmp = journal_ + ".new";
  unlink(tmp.c_str());
  int out = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool ok = out >= 0 && write(out, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            fsync(out) == 0;
  if (out >= 0) close(out);
  ok = ok && rename(tmp.c_str(), journal_.c_str()) == 0;
  if (fd_ >= 0) close(fd_);
  fd_ = ok ? open(journal_.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC) : -1;
  journal_ok_ = fd_ >= 0;
  journal_lines_ = seen_.size();
}

void ReplayGuard::Prune(int64_t now) {
  for (auto it = seen_.begin(); it != seen_.end();) {
    it = it->second < now ? seen_.erase(it) : std::next(it);
  }
  next_prune_ = now + 10;
  if (journal_lines_ > 2 * seen_.size() + 1000) Compact();
}

bool ReplayGuard::FirstUse(const Ticket& t, int64_t now) {
  util::MutexLock lock(mu_);
  if (now >= next_prune_) Prune(now);
  if (!seen_.emplace(t.nonce, t.expires).second) return false;
  if (fd_ >= 0) {
    // One append a ticket, before the ticket is honoured: a restart a moment
    // later still finds it.
    const std::string line = t.nonce + " " + std::to_string(t.expires) + "\n";
    if (write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      journal_ok_ = false;
    }
    ++journal_lines_;
  }
  return true;
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace pgfleet::net
