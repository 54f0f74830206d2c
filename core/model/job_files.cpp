#include "core/model/job_files.h"

#include <regex>

#include "core/model/job_spec.h"
#include "core/model/json_limits.h"

namespace pgfleet::model {
namespace {

using nlohmann::json;

[[noreturn]] void Refuse(const std::string& message) { throw SpecError("files", message); }

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Decoded bytes of well-formed base64 (as the database's rule: groups of
// four, '=' padding only at the end), or -1.
long DecodedSize(const std::string& s) {
  if (s.size() % 4 != 0) return -1;
  size_t pad = 0;
  while (pad < 2 && pad < s.size() && s[s.size() - 1 - pad] == '=') ++pad;
  for (size_t i = 0; i < s.size() - pad; ++i) {
    if (Base64Value(s[i]) < 0) return -1;
  }
  return static_cast<long>(s.size() / 4 * 3 - pad);
}

void ValidatePath(const std::string& path) {
  const std::string relative =
      "files paths must be relative, no empty, . or .. components (got \"" + path + "\")";
  if (path.empty()) Refuse(relative);
  if (path.size() > kMaxFilePathBytes) {
    Refuse("files paths must be at most " + std::to_string(kMaxFilePathBytes) + " bytes (got " +
           std::to_string(path.size()) + ")");
  }
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f) Refuse("files paths must not hold control characters");
  }
  if (path.front() == '/') Refuse(relative);
  for (size_t start = 0; start <= path.size();) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") Refuse(relative);
    start = end + 1;
  }
}

int ParseMode(const std::string& path, const json& v) {
  static const std::regex octal("^0?[0-7]{3}$");
  if (!v.is_string() || !std::regex_match(v.get<std::string>(), octal)) {
    Refuse("files.*.mode must be octal 000-777 (no setuid, setgid, sticky), such as \"0755\" "
           "(files." + path + ".mode is " + ShowJson(v) + ")");
  }
  return std::stoi(v.get<std::string>(), nullptr, 8);
}

}  // namespace

bool IsFileText(const std::string& content) {
  const size_t n = content.size();
  for (size_t i = 0; i < n;) {
    const auto c = static_cast<unsigned char>(content[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) return false;
      ++i;
      continue;
    }
    // A UTF-8 sequence: its lead byte says how many continuation bytes follow.
    size_t more = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
    if (more == 0 || i + more >= n) return false;
    for (size_t k = 1; k <= more; ++k) {
      if ((static_cast<unsigned char>(content[i + k]) & 0xc0) != 0x80) return false;
    }
    i += more + 1;
  }
  return true;
}

void ValidateJobFiles(const JobFiles& files) {
  if (files.size() > static_cast<size_t>(kMaxFiles)) {
    Refuse("files must be an object of at most " + std::to_string(kMaxFiles) + " files (got " +
           std::to_string(files.size()) + ")");
  }
  size_t total = 0;
  for (const auto& [path, f] : files) {
    ValidatePath(path);
    if (f.mode < 0 || f.mode > 0777) {
      Refuse("files.*.mode must be octal 000-777 (no setuid, setgid, sticky) (files." + path +
             ".mode is " + std::to_string(f.mode) + ")");
    }
    if (f.base64) {
      long n = DecodedSize(f.content);
      if (n < 0) {
        Refuse("files.*.content must be text, or base64 with \"base64\": true (files." + path +
               ".content is not base64)");
      }
      total += static_cast<size_t>(n);
    } else {
      if (!IsFileText(f.content)) {
        Refuse("files.*.content must be text, or base64 with \"base64\": true (files." + path +
               ".content holds control characters other than tab, newline and CR, or is not "
               "UTF-8)");
      }
      total += f.content.size();
    }
  }
  if (total > kMaxFilesBytes) {
    Refuse("files must hold at most 1 MiB in all (content bytes summed: got " +
           std::to_string(total) + ")");
  }
}

JobFiles ParseJobFiles(const json& j) {
  JobFiles out;
  if (j.is_null()) return out;
  if (!j.is_object()) {
    Refuse("files must be an object of at most " + std::to_string(kMaxFiles) +
           " files (path: {content, mode, base64}; got " + ShowJson(j) + ")");
  }
  if (j.size() > static_cast<size_t>(kMaxFiles)) {
    Refuse("files must be an object of at most " + std::to_string(kMaxFiles) + " files (got " +
           std::to_string(j.size()) + ")");
  }
  for (auto& [path, v] : j.items()) {
    if (!v.is_object()) {
      Refuse("files must be an object of at most " + std::to_string(kMaxFiles) +
             " files (files." + path + " is " + ShowJson(v) + ", not {content, mode, base64})");
    }
    for (auto& [k, ignored] : v.items()) {
      if (k != "content" && k != "mode" && k != "base64") {
        Refuse("files.* may hold only content, mode and base64 (files." + path + " has " + k + ")");
      }
    }
    JobFile f;
    auto content = v.find("content");
    if (content == v.end() || !content->is_string()) {
      Refuse("files.*.content must be a string (files." + path + ".content is " +
             (content == v.end() ? std::string("missing") : ShowJson(*content)) + ")");
    }
    f.content = content->get<std::string>();
    if (auto b = v.find("base64"); b != v.end()) {
      if (!b->is_boolean()) {
        Refuse("files.*.base64 must be true or false (files." + path + ".base64 is " +
               ShowJson(*b) + ")");
      }
      f.base64 = b->get<bool>();
    }
    if (auto m = v.find("mode"); m != v.end()) f.mode = ParseMode(path, *m);
    out.emplace(path, std::move(f));
  }
  ValidateJobFiles(out);
  return out;
}

json ToJson(const JobFiles& files) {
  if (files.empty()) return nullptr;
  json out = json::object();
  for (const auto& [path, f] : files) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", f.mode);
    json v = {{"content", f.content}, {"mode", mode}};
    if (f.base64) v["base64"] = true;
    out[path] = std::move(v);
  }
  return out;
}

std::string FileBytes(const JobFile& f) {
  if (!f.base64) return f.content;
  if (DecodedSize(f.content) < 0) {
    Refuse("files.*.content must be text, or base64 with \"base64\": true (not base64)");
  }
  std::string out;
  out.reserve(f.content.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : f.content) {
    if (c == '=') break;
    acc = (acc << 6) | static_cast<uint32_t>(Base64Value(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::string Base64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 2]);
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back(i + 2 < bytes.size() ? kAlphabet[n & 63] : '=');
  }
  return out;
}

}  // namespace pgfleet::model
