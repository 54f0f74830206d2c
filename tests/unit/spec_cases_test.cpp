// The shared table of spec cases (tests/shared/spec_cases.h) against hostd's
// validator; tests/integration/spec_cases_test.cpp runs it against the database.

#include "spec_cases.h"

#include <gtest/gtest.h>

#include "core/model/job_spec.h"
#include "core/model/json_limits.h"

namespace pgfleet::testing {
namespace {

TEST(SpecCases, HostdRefusesExactlyWhatTheTableSaysWithItsMessage) {
  for (const auto& c : SpecCases()) {
    std::string error;
    try {
      model::ParseJobSpec(model::ParseBoundedJson(c.spec, "spec"));
    } catch (const model::SpecError& e) {
      error = e.what();
    }
    if (c.message.empty()) {
      EXPECT_EQ("", error) << c.name;
    } else {
      EXPECT_NE(std::string::npos, error.find(c.message)) << c.name << ": got \"" << error << "\"";
    }
  }
}

}  // namespace
}  // namespace pgfleet::testing
