#include "core/util/text.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace pgfleet::util {

std::string SanitizeUtf8(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  const auto* s = reinterpret_cast<const unsigned char*>(in.data());
  size_t n = in.size(), i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c == 0) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    }
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80)
        ok = false;
      else
        cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // Reject overlong forms, surrogates and values past U+10FFFF.
    if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
               (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)) {
      ok = false;
    }
    if (ok) {
      out.append(in, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string TailOfFile(const std::string& path, size_t max_bytes) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return "";
  std::streamoff size = f.tellg();
  std::streamoff start = size > static_cast<std::streamoff>(max_bytes) ? size - max_bytes : 0;
  f.seekg(start);
  std::string buf(static_cast<size_t>(size - start), '\0');
  f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
  buf.resize(static_cast<size_t>(f.gcount()));
  return TailText(buf, start > 0);
}

std::string TailText(const std::string& bytes, bool cut) {
  // Skip continuation bytes cut off from their lead byte.
  size_t skip = 0;
  if (cut) {
    while (skip < bytes.size() && skip < 3 &&
           (static_cast<unsigned char>(bytes[skip]) & 0xC0) == 0x80)
      ++skip;
  }
  return SanitizeUtf8(bytes.substr(skip));
}

std::string ReadFileOrEmpty(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::chrono::seconds ParseDuration(const std::string& flag, const std::string& v, bool allow_zero) {
  size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
  }
  std::string unit = n >= 0 ? v.substr(used) : "";
  long long mult = unit == "s"   ? 1
                   : unit == "m" ? 60
                   : unit == "h" ? 3600
                   : unit == "d" ? 86400
                                 : 0;
  if (n < 0 || (n == 0 && !allow_zero) || mult == 0) {
    throw std::invalid_argument(flag + " must be a " + (allow_zero ? "" : "positive ") +
                                "duration like 90s, 15m, 12h or 7d (got \"" + v + "\")");
  }
  return std::chrono::seconds(n * mult);
}

double ParseSeconds(const std::string& flag, const std::string& v) {
  // A number, then an optional unit: ms, s (the default), m, h or d.
  size_t used = 0;
  double n = -1;
  try {
    n = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = used > 0 ? v.substr(used) : "?";
  double mult = unit == "" || unit == "s" ? 1
                : unit == "ms"            ? 0.001
                : unit == "m"             ? 60
                : unit == "h"             ? 3600
                : unit == "d"             ? 86400
                                          : 0;
  if (used == 0 || mult == 0 || !(n > 0) || n * mult > 1e9 ||
      v.find_first_of("xXeEnNiI", 0) < used) {  // no hex, exponent, nan or inf
    throw std::invalid_argument(flag +
                                " must be a positive duration like 500ms, 2s, 1.5, 10m, "
                                "2h or 7d (a bare number is seconds; got \"" +
                                v + "\")");
  }
  return n * mult;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string IsoTime(int64_t epoch_seconds) {
  std::time_t t = static_cast<std::time_t>(epoch_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace pgfleet::util
