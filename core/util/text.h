#pragma once
// Small text helpers shared by the daemons and the CLI.

#include <chrono>
#include <cstdint>
#include <string>

namespace pgfleet::util {

// Makes arbitrary bytes safe for a PostgreSQL text column and for JSON:
// invalid UTF-8 sequences become U+FFFD and NUL bytes are dropped.
std::string SanitizeUtf8(const std::string& bytes);

// The last max_bytes bytes of a file (fewer if it is shorter), sanitized, and
// never starting in the middle of a UTF-8 character. Empty if the file is missing.
std::string TailOfFile(const std::string& path, size_t max_bytes);
// The same for bytes already read: sanitized, and when `cut` (they are the
// end of something longer) without a leading partial UTF-8 character.
std::string TailText(const std::string& bytes, bool cut);

// Reads a whole (small) file with plain read(2) calls; "" when it cannot be
// read. For /proc, cgroup and state files that may vanish at any moment.
std::string ReadFileOrEmpty(const std::string& path);

// Reads a whole (small) file; throws std::runtime_error naming the path on failure.
std::string ReadFile(const std::string& path);

// "90s", "15m", "12h", "7d" -> seconds. Throws std::invalid_argument naming
// `flag` for anything else (or for 0 unless allow_zero).
std::chrono::seconds ParseDuration(const std::string& flag, const std::string& value,
                                   bool allow_zero = false);

// A duration flag or config value in seconds: a positive number with an
// optional unit, ms, s (the default), m, h or d ("500ms", "2s", "0.5", "7d").
// Throws std::invalid_argument naming the flag and the syntax.
double ParseSeconds(const std::string& flag, const std::string& value);

// Trims ASCII whitespace at both ends.
std::string Trim(const std::string& s);

// Epoch seconds as UTC ISO 8601, "2026-11-24T16:48:44Z".
std::string IsoTime(int64_t epoch_seconds);

}  // namespace pgfleet::util
