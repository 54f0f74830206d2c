#pragma once
// JSON from outside (API bodies, shim requests, specs) is parsed only through
// ParseBoundedJson: nesting deeper than kMaxJsonDepth is refused by a linear
// scan of the text before any value is built, so no recursive code (dump,
// comparison, our own walkers) ever meets a value deep enough to overflow the
// stack. A job spec's deepest legal value is 3 levels down.

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pgfleet::model {

inline constexpr int kMaxJsonDepth = 32;

// Thrown for text that is not JSON or nests too deep; what() names `what`
// (e.g. "body") and the rule.
class JsonError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The deepest nesting of arrays and objects in text (brackets inside strings
// do not count). Linear, no recursion; does not validate the text.
int JsonNestingDepth(std::string_view text);

// Parses text, refusing nesting deeper than max_depth. Throws JsonError.
nlohmann::json ParseBoundedJson(std::string_view text, const std::string& what,
                                int max_depth = kMaxJsonDepth);

// A short description of a value for error messages: scalars and flat
// arrays or objects (at most 8 scalars) as JSON, cut to 60 characters; any
// other array or object by kind and size, never dumped.
std::string ShowJson(const nlohmann::json& v);

}  // namespace pgfleet::model
