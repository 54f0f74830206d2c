// The job files model (core/model/job_files.h): parsing with defaults, the
// JSON round trip a spec makes to hostd and back, base64 both ways, what is
// text. The rules themselves are tested against the database's with the same
// cases (tests/integration/job_files_test.cpp).

#include "core/model/job_files.h"

#include <gtest/gtest.h>

#include "core/model/job_spec.h"

namespace pgfleet::model {
namespace {

using nlohmann::json;

TEST(JobFiles, ParsesWithDefaultsAndRoundTripsThroughTheSpec) {
  auto files = ParseJobFiles(json::parse(
      R"({"run.sh": {"content": "echo hi", "mode": "755"}, "a/b": {"content": "x"},
          "bin": {"content": "AAH/", "base64": true}})"));
  ASSERT_EQ(3u, files.size());
  EXPECT_EQ(0755, files["run.sh"].mode);
  EXPECT_EQ(0644, files["a/b"].mode);
  EXPECT_TRUE(files["bin"].base64);
  EXPECT_EQ(std::string("\x00\x01\xff", 3), FileBytes(files["bin"]));
  EXPECT_EQ("0755", ToJson(files)["run.sh"]["mode"]);
  EXPECT_FALSE(ToJson(files)["a/b"].contains("base64"));
  JobSpec s;
  s.command = {"./run.sh"};
  s.files = files;
  JobSpec back = ParseJobSpec(ToJson(s));
  EXPECT_EQ(ToJson(s.files), ToJson(back.files));
  JobSpec none;
  none.command = {"true"};
  EXPECT_TRUE(ToJson(none)["files"].is_null());
  EXPECT_TRUE(ParseJobFiles(nullptr).empty());
}

TEST(JobFiles, Base64RoundTripsEveryLength) {
  std::string bytes;
  for (int n = 0; n < 300; ++n) {
    JobFile f;
    f.content = Base64(bytes);
    f.base64 = true;
    ASSERT_EQ(bytes, FileBytes(f)) << n;
    ASSERT_EQ(0u, f.content.size() % 4);
    bytes.push_back(static_cast<char>(n * 37));
  }
  EXPECT_EQ("aGk=", Base64("hi"));
}

TEST(JobFiles, TextIsUtf8WithoutControlCharactersButTabNewlineAndCr) {
  EXPECT_TRUE(IsFileText("a\tb\r\nc ünï €𝄞"));
  EXPECT_TRUE(IsFileText(""));
  EXPECT_FALSE(IsFileText(std::string("a\0b", 3)));
  EXPECT_FALSE(IsFileText("\x1b[31m"));
  EXPECT_FALSE(IsFileText("\x7f"));
  EXPECT_FALSE(IsFileText("\xff"));        // not UTF-8
  EXPECT_FALSE(IsFileText("\xc3"));        // cut short
  EXPECT_FALSE(IsFileText("\xc0\xaf"));    // overlong
  EXPECT_FALSE(IsFileText("\xe2\x82"));    // cut short
}

}  // namespace
}  // namespace pgfleet::model
