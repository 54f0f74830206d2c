#include "cli/output.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

namespace pgfleet::cli {

void PrintTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(header.size());
  for (size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (size_t i = 0; i < r.size(); ++i) {
      out += r[i];
      if (i + 1 < r.size()) out += std::string(w[i] - r[i].size() + 2, ' ');
    }
    std::cout << out << "\n";
  };
  std::vector<std::vector<std::string>> shown;
  shown.reserve(rows.size());
  for (const auto& r : rows) {
    std::vector<std::string> cells;
    for (const auto& c : r) cells.push_back(Printable(c));
    shown.push_back(std::move(cells));
  }
  for (const auto& r : shown) {
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  line(header);
  for (const auto& r : shown) line(r);
}

namespace {
bool g_raw = false;  // set once, by the command's Parse, before any output
}  // namespace

void SetRawOutput(bool raw) { g_raw = raw; }

std::string Printable(const std::string& s, bool keep_lines) {
  if (g_raw) return s;
  std::string out;
  out.reserve(s.size());
  auto hex = [&](unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (keep_lines && (c == '\n' || c == '\t')) {
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      hex(c);
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      hex(c);  // U+0080..U+009F: C1 controls (CSI is U+009B)
      hex(static_cast<unsigned char>(s[++i]));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void PrintJson(const nlohmann::json& j) {
  std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

std::string HealthCounts(const nlohmann::json& f) {
  if (!f.value("health_checked", false)) return "-";
  return f.value("healthy", nlohmann::json(0)).dump() + "/" +
         f.value("unhealthy", nlohmann::json(0)).dump();
}

}  // namespace pgfleet::cli
