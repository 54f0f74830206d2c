// libFuzzer target: a host report as report decoding sees it (hostd's queue,
// the database's report_jobs input). Decoding must never crash; a report
// that decodes must survive a round trip unchanged.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/model/json_limits.h"
#include "core/model/report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace pgfleet::model;
  try {
    nlohmann::json j = ParseBoundedJson(text, "report");
    Report r = ReportFromJson(j);
    nlohmann::json again = ToJson(r);
    if (ToJson(ReportFromJson(again)) != again) std::abort();
  } catch (const std::invalid_argument&) {  // refused with a message: fine
  }
  return 0;
}
