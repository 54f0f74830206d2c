#include "core/model/spec_fields.h"

#include <cstdint>

#include "core/model/job_spec.h"
#include "core/model/json_limits.h"

namespace pgfleet::model {

using nlohmann::json;

namespace {
std::string Show(const json& v) { return ShowJson(v); }
}  // namespace

int IntField(const json& j, const char* key, int fallback, const std::string& field) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) {
    throw SpecError(field, field + " must be an integer (got " + Show(*it) + ")");
  }
  // Above INT64_MAX the value is stored unsigned and would read back wrapped
  // (18446744073709551615 as -1), so check it as unsigned first.
  const bool huge = it->is_number_unsigned() && it->get<uint64_t>() > INT32_MAX;
  auto v = huge ? int64_t{0} : it->get<int64_t>();
  if (huge || v < INT32_MIN || v > INT32_MAX) {
    throw SpecError(field, field + " must fit in 32 bits (got " + Show(*it) + ")");
  }
  return static_cast<int>(v);
}

std::string StringField(const json& j, const char* key, const std::string& fallback,
                        const std::string& field) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string()) {
    throw SpecError(field, field + " must be a string (got " + Show(*it) + ")");
  }
  return it->get<std::string>();
}

}  // namespace pgfleet::model
