#include "core/model/json_limits.h"

#include <algorithm>

namespace pgfleet::model {

int JsonNestingDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json ParseBoundedJson(std::string_view text, const std::string& what, int max_depth) {
  if (JsonNestingDepth(text) > max_depth) {
    throw JsonError(what + " must not nest arrays and objects deeper than " +
                    std::to_string(max_depth) + " levels");
  }
  auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) throw JsonError(what + " must be valid JSON");
  return j;
}

std::string ShowJson(const nlohmann::json& v) {
  if (v.is_structured()) {
    // Shown as JSON only when flat (one level, checked without recursion).
    bool flat = v.size() <= 8;
    for (const auto& e : v) flat = flat && !e.is_structured();
    if (!flat) {
      return v.is_array() ? "an array of " + std::to_string(v.size()) + " items"
                          : "an object of " + std::to_string(v.size()) + " keys";
    }
  }
  nlohmann::json shown = v;
  if (v.is_string() && v.get_ref<const std::string&>().size() > 60) {
    shown = v.get_ref<const std::string&>().substr(0, 57) + "...";
  }
  std::string s = shown.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

}  // namespace pgfleet::model
