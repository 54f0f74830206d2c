// libFuzzer target: a job spec as it reaches hostd (POST /v1/jobs, the
// database's pgfleet.job_spec). Parsing, validation, re-serialization and
// error messages must never crash, whatever the bytes; a spec that parses
// must survive a round trip unchanged.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/model/job_spec.h"
#include "core/model/json_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace pgfleet::model;
  nlohmann::json j;
  try {
    j = ParseBoundedJson(text, "spec");
  } catch (const JsonError& e) {
    return 0;
  }
  (void)ShowJson(j);
  try {
    JobSpec spec = ParseJobSpec(j);
    Validate(spec);
    nlohmann::json again = ToJson(spec);
    JobSpec back = ParseJobSpec(again);
    if (ToJson(back) != again) std::abort();  // the round trip changed the spec
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
