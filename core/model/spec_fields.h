#pragma once
// Reading one field of a spec object (job_spec.cpp, health_check.cpp), with
// the spec's messages: SpecError(field, "<field> must be ... (got <value>)").
// `key` is the field's name in the object, `field` the name errors give it
// (e.g. "health_check.port").

#include <nlohmann/json.hpp>
#include <string>

namespace pgfleet::model {

// An integer of 32 bits, or fallback when missing or null.
int IntField(const nlohmann::json& j, const char* key, int fallback, const std::string& field);
inline int IntField(const nlohmann::json& j, const char* key, int fallback) {
  return IntField(j, key, fallback, key);
}
// A string, or fallback when missing or null.
std::string StringField(const nlohmann::json& j, const char* key, const std::string& fallback,
                        const std::string& field);
inline std::string StringField(const nlohmann::json& j, const char* key,
                               const std::string& fallback) {
  return StringField(j, key, fallback, key);
}

}  // namespace pgfleet::model
